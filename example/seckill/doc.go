// Package seckill is the flash-sale ("seckill") service of the lockgate
// example: vouchers with limited stock, one order per user and voucher.
//
// The order handler follows the project's design notes: count the user's
// orders for the voucher; if there are none, take one from stock with an
// atomic conditional decrement and insert the order, in one transaction.
// The count runs in its own statement, before the write transaction, so
// without a lock two requests of the same user that reach different nodes
// both see zero orders and both insert one: the check-then-insert race is
// real. A lock on "order:<user>:<voucher>" serialises them:
//
//   - LockRedis: a lockgate core.Locker through the adapter of the entry
//     point, one line each: the HTTP stack's (Stacks: Fiber v2 and v3,
//     net/http, chi, Gin, Echo v4 and v5, each with its own lockgate
//     middleware),
//     grpclock for gRPC (NewGRPCServer) and connectlock for Connect
//     (NewConnectServer), on the same key; works across nodes.
//   - LockLocal: an in-process mutex per key; safe on one node only.
//   - LockNone: no lock at all.
//
// Under LockRedis the check and the insert are one transaction ordered by
// the lease's fence (Store.PlaceOrder, with lockgate's fence.Guard): the
// key's fence row is taken first, so that even two holders of one lock —
// the first one's lock lost while it worked, when Redis restarted empty or
// was flushed — place one order, whichever reaches the database first; a
// write whose fence is lower than the last one seen for its key is
// rejected with ErrStaleFence. Service.Unfenced (seckill serve -unfenced)
// keeps the check before the transaction: the control of that scenario.
//
// Storage is SQL: an embedded SQLite file by default (modernc.org/sqlite,
// pure Go, WAL mode with a busy timeout so that writers of several
// processes wait for each other) or PostgreSQL for a postgres:// DSN (pgx).
package seckill
