// Package core is lockgate's lock engine: a distributed lock kept in Redis
// (go-redis v9; a single master, a Sentinel failover client, a Cluster, or
// Redlock over independent masters) that is safe, reentrant, fenced, renews
// itself while held, tells its holder when it is lost, waits for a busy
// lock without polling, and says truthfully what happened. It is the only
// package of lockgate that talks to Redis; the HTTP and gRPC adapters and
// the fx modules call it.
//
//	l, err := core.New(rdb)              // one per Redis deployment; l.Shutdown(ctx) at exit
//	lease, err := l.Lock(ctx, "order:42:7")
//	if err != nil {
//		return err // busy (ErrNotObtained), Redis down or hung (ErrUnavailable), bad input (ErrInvalid), ctx ended
//	}
//	defer lease.Unlock(ctx)
//	work(lease.Context(), lease.Fence()) // cancelled if the lock is lost
//
// # Guarantees
//
//   - One owner at a time while Redis keeps its data: every acquisition has
//     a fresh random owner, and Lua scripts take and release the lock
//     (compare-and-delete), so no owner deletes another's lock.
//   - Every call is safe to retry: the client never re-sends a lock script,
//     and what the Locker re-sends itself runs once (done markers).
//   - Every call returns within its budget (WithWait, WithAttemptTimeout,
//     WithReleaseTimeout, or ctx's deadline) plus 50ms, whatever the
//     client's timeouts; a hung Redis is never reported busy.
//   - A lost lock is known before anyone else can have it: the watchdog
//     renews every TTL/3, and Lease.Context is cancelled (ErrLockLost) when
//     a renewal finds the lock gone, when renewals fail until the lease's
//     validity (sent + TTL − drift) ends, or as soon as a node that
//     restarted or failed over answers again.
//   - Re-entry through the lease's context: same fence, no round trip.
//   - Waiters queue in Redis, first come first served across processes, and
//     a release hands the lock to the first live waiter in the same script.
//   - Every lock has a fence that increases over the holders of a key: use
//     it at the store when correctness depends on the lock.
//
// How each is kept, and its limits, are in the repository's docs:
// docs/design.md (Redis layout, budgets, the watchdog, waiting and
// handoff), docs/guarantees.md, docs/topologies.md (Sentinel, Cluster,
// WithReplicaAck, Redlock) and docs/fencing.md.
//
// # Requirements
//
// Redis 7.0 or later (the first lock checks, ErrUnsupported otherwise) with
// maxmemory-policy noeviction (any other can evict a held lock: the Locker
// warns once). Recommended go-redis settings: ContextTimeoutEnabled: true
// (calls then run on the caller's goroutine) and a ReadTimeout below your
// wait budgets (a retry then fits inside one). Locker.Ping checks every node
// at start-up.
//
// # Observing and inspecting
//
// WithObserver receives an Event for every acquisition, wait, release,
// renewal and loss, named by WithPattern (never the key: it carries request
// data); package otellock turns them into OpenTelemetry metrics and spans.
// For operators, Inspect reads a lock without taking it, List finds locks
// by a glob and ForceRelease removes a hold whose holder is gone (the
// lockgate command wraps them).
package core
