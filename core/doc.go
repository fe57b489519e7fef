// Package core is lockgate's lock engine: a distributed lock kept in Redis
// 7.0+ (go-redis v9: one master, Sentinel, Cluster, or Redlock over
// independent masters). Locks are reentrant, fenced, renewed while held,
// queued first come first served, and every call returns within its budget.
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
//     higher than the last: pass it to the store (docs/fencing.md).
//   - Every call returns within its budget (WithWait, WithAttemptTimeout,
//     WithReleaseTimeout, or ctx's deadline) plus 50ms, and is safe to retry.
//   - Lease.Context is cancelled (cause ErrLockLost) before anyone else can
//     hold a lost lock; the watchdog renews every TTL/3.
//   - Lock with a lease's context re-enters it: same fence, no round trip.
//
// Beside Lock: Semaphore (one of N permits), RLock (shared with readers) and
// LockMulti (several names, all or none). Ping checks every node at start-up;
// WithObserver receives events; Inspect, List and ForceRelease are for
// operators. Requirements: Redis 7.0+ with maxmemory-policy noeviction.
//
// More in the repository's docs/: usage.md (API, errors), design.md,
// guarantees.md, topologies.md, fencing.md, observability.md, internals.md.
package core
