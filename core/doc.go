// Package core is lockgate's lock engine: a distributed lock kept in Redis
// 7.0+ (go-redis v9: one master, a Sentinel failover client, a Cluster, or
// Redlock over independent masters). Locks are reentrant, fenced, renewed
// while held, queued first come first served, and every call returns within
// its budget. The HTTP and gRPC adapters and the fx modules call it.
//
//	l, err := core.New(rdb)              // one per Redis deployment; l.Shutdown(ctx) at exit
//	lease, err := l.Lock(ctx, "order:42:7")
//	if err != nil {
//		return err // busy (ErrNotObtained), Redis down or hung (ErrUnavailable), bad input (ErrInvalid), ctx ended
//	}
//	defer lease.Unlock(ctx)
//	work(lease.Context(), lease.Fence()) // cancelled if the lock is lost
//
// What a caller can rely on:
//
//   - One owner at a time while Redis keeps its data; each holder's fence is
//     higher than the last: pass it to the store when correctness depends
//     on the lock (docs/fencing.md).
//   - Every call returns within its budget (WithWait, WithAttemptTimeout,
//     WithReleaseTimeout, or ctx's deadline) plus 50ms, and is safe to retry.
//   - Lease.Context is cancelled (cause ErrLockLost) before anyone else can
//     hold a lost lock; the watchdog renews every TTL/3.
//   - Lock with a lease's context re-enters it: same fence, no round trip.
//
// Beside Lock: Semaphore takes one of N permits of a name (at most N
// holders, each lease one permit with its own fence), RLock a name shared
// with other readers (Lock of the name is the writer and excludes them),
// LockMulti several names in one lease, all or none.
//
// Requirements: Redis 7.0 or later with maxmemory-policy noeviction, and
// go-redis settings as in docs/topologies.md; Locker.Ping checks every node
// at start-up. WithObserver receives an Event
// per acquisition, wait, release, renewal and loss; Inspect, List and
// ForceRelease are for operators.
//
// More in the repository: docs/usage.md (API and errors), docs/design.md
// (how it works), docs/guarantees.md, docs/topologies.md (Sentinel,
// Cluster, WithReplicaAck, Redlock), docs/observability.md and
// docs/internals.md (the engine, for maintainers).
package core
