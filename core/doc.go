// Package core is lockgate's lock engine: a distributed lock kept in Redis
// (go-redis v9; a single master, a Sentinel failover client or a Cluster)
// that is safe, reentrant, fenced, renews itself while held, tells its
// holder when it is lost, and waits for a busy lock without polling.
//
// It is the only package of lockgate that talks to Redis; the HTTP and gRPC
// adapters and the fx modules call it.
//
//	l := core.New(rdb)                 // one per Redis deployment; l.Close() at shutdown
//	lease, err := l.Lock(ctx, "order:42:7")
//	switch {
//	case errors.Is(err, core.ErrNotObtained): // busy: core.RetryAfter(err) says for how long
//	case errors.Is(err, core.ErrUnavailable): // Redis down: do not run the critical section
//	case err != nil:                          // bad input (core.ErrInvalid) or closed
//	}
//	defer lease.Unlock(context.WithoutCancel(ctx))
//	work(lease.Context(), lease.Fence())      // cancelled if the lock is lost
//
// # Guarantees
//
// Owners: every Lock without an owner in its context gets a fresh random
// owner; the lock is a Redis hash {fence, <owner>: holds}, taken and released
// by Lua scripts (compare-and-delete), so an owner never deletes another's
// lock. Re-entry: a context derived from Lease.Context carries the owner, and
// Lock with it adds a hold instead of waiting for itself.
//
// Lifetime: a lease is valid until sent+TTL−drift, measured on the local
// monotonic clock from the moment the acquire was sent (drift = TTL·1% +
// 2ms, as in the Redlock algorithm). The watchdog renews it every TTL/3 in
// pipelined batches (three goroutines per Locker whatever the number of
// leases). When a renewal finds the lock gone, or renewals fail until the
// validity ends, Lease.Context is cancelled with cause ErrLockLost — before
// Redis can have expired the key and handed it to anyone else.
//
// Waiting: the release script publishes on the lock's channel. A Locker keeps
// one Pub/Sub connection subscribed to the channels of the locks its callers
// wait for; its waiters queue per key in FIFO order and only the head
// contends. Between notifications the head retries after the RetryStrategy's
// backoff, capped by the holder's remaining TTL and the wait budget.
//
// Fencing: each first acquisition gets a fence, max(server clock in µs, last
// fence + 1), strictly increasing over the holders of a key as long as the
// server clock does not step back by more than the time since the last
// acquisition (the last fence is remembered for WithFenceWindow, default
// 10m). See the README for the exact conditions and the Redis layout.
package core
