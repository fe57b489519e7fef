// Package fence makes a store's write conditional on the fence of the lease
// that guards it, so that a holder that lost its lock — Redis restarted
// without persistence, failed over to a replica that had not seen the key,
// was flushed, or the holder was paused past its lease — cannot write after
// a newer holder. It takes no lock and talks to no lock service: it records
// fences where the data is.
//
// Every lockgate lease has a fence (core.Lease.Fence), strictly increasing
// per lock name across holders (see docs/fencing.md for the exceptions).
// The rule a guard enforces per resource, usually the lock's name
// (core.Lease.Key): a write whose fence is lower than the highest already
// recorded for the resource is refused with a *StaleError (errors.Is(err,
// ErrStale)) and writes nothing; an equal or higher fence is recorded and
// the write goes on.
//
// # SQL: Guard
//
// Guard works through database/sql with PostgreSQL, SQLite and MySQL or
// MariaDB, in the caller's transaction and its table of fences (DDL,
// CreateTable). Call Check first in the write's transaction, then read
// what the write depends on, then write:
//
//	tx, err := db.BeginTx(ctx, nil)
//	...
//	defer tx.Rollback()
//	if err := guard.Check(ctx, tx, lease.Key(), lease.Fence()); err != nil {
//		return err // *fence.StaleError: a newer holder has written
//	}
//	// "has this user ordered?", then the insert, then:
//	return tx.Commit()
//
// Check takes the fence row's write lock (SQLite: the database's write
// lock) and keeps it until the transaction ends, so the guarded
// transactions of one resource run one at a time from their Check on. Two
// holders of one lock at once (the first one's lock was lost) are then
// safe whichever reaches the database first:
//
//   - the newer first: the older one's Check waits for it, then finds the
//     higher fence and fails with a *StaleError, whatever the order in which
//     they began or tried to commit;
//   - the older first: the newer one's Check waits until the older one
//     commits, and its reads after Check see what the older one wrote (its
//     order, say), so a check-then-insert does not insert twice.
//
// The second case is why the reads go after Check: a read made before it
// (or outside the transaction) may predate the older holder's commit, and
// the newer holder would act on it. Per database:
//
//   - PostgreSQL, READ COMMITTED (the default): each statement reads a
//     snapshot taken when it starts, and Check's statement returns only
//     once the row is free, so every later statement sees the commit it
//     waited for. Under REPEATABLE READ or SERIALIZABLE the snapshot is the
//     first statement's: the waiting Check fails with a serialization
//     failure (SQLSTATE 40001) once the other one commits; roll back and try
//     again.
//   - SQLite: one writer at a time for the whole database. Begin the
//     transaction IMMEDIATE (modernc.org/sqlite and mattn/go-sqlite3:
//     _txlock=immediate in the DSN) so that it waits for the write lock at
//     BEGIN, with a busy timeout (_pragma=busy_timeout(5000), or
//     _busy_timeout); everything it reads is then the latest. In a DEFERRED
//     transaction that read before Check, Check fails with SQLITE_BUSY
//     while another writer holds the database (WAL): roll back and try
//     again.
//   - MySQL and MariaDB (InnoDB), REPEATABLE READ (the default): a plain
//     SELECT reads the snapshot of the transaction's first plain SELECT. With
//     Check first, that snapshot is taken after the wait and sees the commit
//     waited for. A plain SELECT before Check (or START TRANSACTION WITH
//     CONSISTENT SNAPSHOT) fixes an older snapshot, and the check after
//     Check misses the other holder's row: read with SELECT … FOR SHARE
//     (MariaDB: LOCK IN SHARE MODE) or FOR UPDATE, or use READ COMMITTED.
//     Under contention InnoDB may end one transaction with a deadlock error
//     (1213): roll back and try again.
//
// The record is written in the transaction: one that rolls back records
// nothing (and wrote nothing). The fence/drivertest module runs all of this
// on the three databases.
//
// A uniqueness constraint (a unique index on the orders' (user, voucher),
// say) remains the backstop for what a fence cannot see: writes made
// without a lease, or a store whose fence records were lost with it.
//
// # Redis data: Script
//
// Script is a Lua script whose body runs only after the same check, in the
// same atomic call: the fence record is a Redis key beside the data (Key),
// which on a Cluster must share the data keys' hash slot. It guards Redis
// data only while that Redis keeps the record: data and record are lost
// together.
package fence
