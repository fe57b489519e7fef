// Package core is lockgate's lock engine: a distributed lock kept in Redis
// (go-redis v9; a single master, a Sentinel failover client or a Cluster)
// that is safe, reentrant, fenced, renews itself while held, tells its
// holder when it is lost, waits for a busy lock without polling, and says
// truthfully what happened.
//
// It is the only package of lockgate that talks to Redis; the HTTP and gRPC
// adapters and the fx modules call it.
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
// Owners: every acquisition in Redis gets a fresh random owner; the lock is
// a Redis hash {owner, fence} taken and released by Lua scripts
// (compare-and-delete), so an owner never deletes another's lock. Owners
// never come from request data.
//
// Re-entry: a Lock whose context is (or derives from) the context of a
// lease that holds the same key re-enters it: same fence, same lifetime, a
// hold counted in the process (no round trip); the last Unlock releases the
// lock in Redis. Only that key: goroutines sharing a lease's context and
// locking another key are separate owners. NewOwner hides the chain.
//
// Retries: the Locker sends its scripts so that go-redis never re-sends
// them (go-redis's per-command NoRetry), so an answered call ran exactly
// once; a call that failed may still run, and the Locker resolves it: a
// waiting Lock tries again under the same owner within its budget (a
// repeated acquire finds its own owner and answers the same fence), Unlock
// sends its release again within its release timeout, and from the first
// failure on each release of that owner leaves a short-lived done marker
// (lockgate:{N}:done:<owner>, with go-redis's defaults about a minute), so
// a repeated release answers the same and a late copy of an acquire takes
// nothing. A cycle whose calls were all answered leaves no marker.
//
// Budgets: Lock returns by the end of its wait budget (WithWait, or ctx's
// deadline when earlier) plus at most 50ms for a reply already on its way,
// and Unlock by its release timeout (WithReleaseTimeout), whatever the
// client's timeouts and retries. A call still in flight then goes on in the
// background; if it took the lock, exactly that hold is released again.
//
// Outcomes: ErrNotObtained (a *BusyError) only when Redis answered "busy";
// ErrUnavailable when it could not be reached, failed or did not answer in
// time — a hung Redis is never reported busy; the context's own error when
// it ended before any answer (a context already ended sends nothing).
//
// Lifetime: a lease is valid until sent+TTL−drift, measured on the local
// monotonic clock from the moment the acquire was sent (drift = TTL·1% +
// 2ms, as in the Redlock algorithm). The watchdog renews it every TTL/3 in
// pipelined batches (on a Cluster, one batch per node, so a hung node delays
// only its own leases). When a renewal finds the lock gone, or renewals fail
// until the validity ends, Lease.Context is cancelled with cause ErrLockLost
// — before Redis can have expired the key and handed it to anyone else. The
// lease's context keeps its parent's deadline; Lease.Valid reports the
// validity.
//
// Waiting: a Lock that finds the lock busy joins the lock's queue in Redis
// (first come, first served across every Locker and process) and waits to be
// handed the lock: whoever frees it — the release, a waiter that gives up,
// or any attempt that finds the holder gone — makes the first live waiter
// the holder in the same script call (its own fence) and tells it on the
// lock's channel (SPUBLISH, so on a Cluster only the lock's shard carries
// it; nothing is published when no one waits). The grant is in Redis, not
// only in the message: the waiter learns of it whatever the order of the
// message, its own queueing reply and its joining the Locker's room (an
// early message is kept for it; when one may have been missed, the waiter
// looks in Redis at once). The waiter holds the lock when the message
// arrives, with no further round trip; its validity counts from the send
// time of its last queue refresh (a grant that comes too late for that is
// claimed by an attempt). A Locker keeps one Pub/Sub connection per Redis
// node, subscribed to the channels of the locks its callers wait for (on a
// Cluster one SSUBSCRIBE a channel; the connection follows slot migrations
// and failovers). While waiting, a caller refreshes its queue entry every
// TTL/3 from the last refresh, whatever else happens (that refresh is also
// its retry should a message be lost, besides one when the holder's TTL as
// last seen runs out: about one command per TTL/3 per waiter, 0.1/s with
// the default 30s TTL); an entry not refreshed for TTL/2 (at least TTL/3 +
// 100ms) is skipped, so a waiter that crashed costs at most that, and the
// queue lives as long as its longest entry, whatever the others' TTLs. A
// waiter keeps its place and its owner through a failed refresh (a master
// restarting, a failover; on a Sentinel or Cluster client a refused dial
// too, see Locker.Lock) and tries again within its budget; a waiter that
// gives up leaves the queue, passing the lock on if it had just been
// handed it. A free lock goes to the queue's first live waiter: TryLock
// never jumps the queue. Liveness: on a healthy deployment a lock that is
// free, or granted to a live waiter, is held again within one round trip
// and one message (the fault rig checks 150ms on a loaded 2-core machine).
// A busy error carries how long to wait (the holder's remaining TTL, an
// upper bound while it does not renew, or the time the waiters ahead may
// take) and a hint of when the lock is likely free (the mean hold time this
// Locker has seen).
//
// Concurrent acquires and releases of one Locker on a plain client are
// coalesced: while round trips are in flight, the calls that arrive meanwhile
// go together as one pipeline (see WithoutCoalescing).
//
// Replication: Redis replicates asynchronously, so a master that fails
// right after a grant can let a failover hand the same lock to a second
// owner. WithReplicaAck(n, timeout) makes grants and renewals wait for n
// replicas (WAIT, in the same round trip): a lock is returned only once a
// replica has it, and otherwise Lock fails with ErrNotReplicated.
// docs/topologies.md in the repository has what each deployment guarantees,
// measured.
//
// Redlock: NewRedlock gives the same Locker over N independent masters; a
// lock needs a majority of them, every call goes to all in parallel with a
// per-node timeout (an acquire returns once a majority granted), and fences
// are made to increase across majorities (see NewRedlock and "Redlock" in
// docs/topologies.md). Redlock's waiters do not queue in Redis: they are
// woken by a release on any node, and a Locker lets one waiter of a lock at
// a time try, in arrival order.
//
// Fencing: each acquisition gets a fence, max(server clock in µs, last fence
// + 1), strictly increasing over the holders of a key as long as the server
// clock does not step back by more than the time since the last acquisition
// (the last fence is kept per Cluster hash slot, for WithFenceWindow after
// the slot's last acquisition, default 10m). See
// docs/fencing.md in the repository for the exact conditions, and
// docs/design.md for the Redis layout.
//
// # Requirements
//
// Redis 7.0 or later (PEXPIRE … GT, SET … GET, script flags): the first lock
// checks the server once and a server too old fails every lock with
// ErrUnsupported naming its version. The eviction policy must be noeviction:
// any other lets Redis evict a held lock under memory pressure and admit a
// second owner; where CONFIG GET is allowed the Locker warns once (log and
// Observer). Over maxmemory new locks fail (ErrUnavailable, OOM) while held
// ones are still renewed and released (those scripts run with allow-oom).
// Keys expire on the server's clock: a forward step of it expires a lock
// early, like a pause of the holder; fencing is what makes that harmless.
//
// # Observing and inspecting
//
// WithObserver receives an Event for every acquisition, wait, give-up,
// release, renewal and loss, named by the call's WithPattern (never put the
// key, which carries request data, in a metric attribute); the otel module
// (package otellock) turns them into OpenTelemetry metrics and spans.
// WithHolderTag stores a caller's tag (the otel module: its traceparent)
// with each lock and hands it to whoever finds the lock busy. WithLogger
// receives lost locks and failed releases. For operators, Inspect reads one
// lock without taking it, List finds locks by a glob, and ForceRelease
// removes a hold whose holder is gone (the lockgate command wraps the
// three).
//
// Recommended go-redis settings: ContextTimeoutEnabled: true, so that
// go-redis itself stops reading when a budget ends and calls run on the
// caller's goroutine (without it they run on a goroutine of the Locker that
// the caller stops waiting for: correct, but slower), and a ReadTimeout
// below your wait budgets, so that a retry happens inside the budget.
package core
