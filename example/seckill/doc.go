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
//     net/http, chi, Gin, Echo, each with its own lockgate middleware),
//     grpclock for gRPC (NewGRPCServer) and connectlock for Connect
//     (NewConnectServer), on the same key; works across nodes.
//   - LockLocal: an in-process mutex per key; safe on one node only.
//   - LockNone: no lock at all.
//
// Each order records the fence of the lease that guarded it, and a write
// carrying a fence lower than the last one seen for its key is rejected
// with ErrStaleFence (see Store.PlaceOrder).
//
// Storage is SQL: an embedded SQLite file by default (modernc.org/sqlite,
// pure Go, WAL mode with a busy timeout so that writers of several
// processes wait for each other) or PostgreSQL for a postgres:// DSN (pgx).
package seckill
