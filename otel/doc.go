// Package otellock records lockgate's events (core.Observer) as
// OpenTelemetry metrics and spans. It is a module of its own, so the
// library's go.mod has no OpenTelemetry dependency.
//
//	obs, err := otellock.New() // the global MeterProvider and TracerProvider
//	if err != nil { ... }
//	locker, err := core.New(client, obs.Options()...)
//
// Options is core.WithObserver(obs) and core.WithHolderTag(obs.HolderTag).
// Every observation is attributed by the lock's pattern (core.WithPattern;
// the adapters set it from their key template, "unnamed" without one),
// never by the key, which carries request data.
//
// # Metrics
//
// All on the meter ScopeName; the attribute pattern on each:
//
//	lockgate.lock.acquire.duration  histogram, s   Lock and TryLock calls; outcome = acquired | reentered
//	                                               | busy | canceled | unavailable | invalid
//	lockgate.lock.hold.duration     histogram, s   holds, acquisition to release or loss
//	lockgate.lock.held              up-down        locks this process holds now
//	lockgate.lock.waiters           up-down        Lock calls of this process waiting in a queue now
//	lockgate.lock.renewals          counter        watchdog renewals; outcome = ok | failed | lost
//	lockgate.lock.lost              counter        leases lost; reason = not_held | expired | closed
//	lockgate.lock.releases          counter        releases sent to Redis; outcome = ok | not_held | failed
//	lockgate.redis.clock.offset     gauge, s       Redis server clock − local clock (no pattern)
//
// Outcomes: busy is a lock held by another owner until the wait budget
// ended (also when the budget was the context's deadline); canceled a
// context cancelled while waiting, a context that had ended before any
// answer, or a Locker closed; unavailable Redis down, hung, failing, not
// acknowledged by enough replicas or too old; invalid bad input (nothing was
// sent). A renewal lost is one that found the lock gone or another owner's
// (an Extend that did counts too); lost reasons: not_held (as said),
// expired (renewals failed until the lease's validity ended), closed
// (Close ended a held lease without releasing it). A re-entry's Unlock
// releases nothing in Redis and is not counted; a retried Unlock counts as
// another release but not as another end of the hold.
//
// The clock offset is estimated at no extra round trip: the acquire script
// reads the server's clock for the fence, and a first attempt's fence is
// that reading, compared with the midpoint of the call's round trip (error
// at most half of it). A Redlock's fence may be the Locker's own proposal
// (its clock, 10ms ahead), which reads no server clock: a Redlock Locker's
// acquisitions are not sampled. Locks depend on
// clocks running at the same rate, not on agreeing (clock drift): watch the
// offset move, not its value.
//
// # Queries
//
// The figures operators watch, in PromQL as the Prometheus
// exporter names the instruments (units as suffixes, _total on counters):
//
//	# hit rate: calls that got the lock, of all calls
//	sum by (pattern) (rate(lockgate_lock_acquire_duration_seconds_count{outcome=~"acquired|reentered"}[5m]))
//	  / sum by (pattern) (rate(lockgate_lock_acquire_duration_seconds_count[5m]))
//
//	# wait time: mean, and p99
//	sum by (pattern) (rate(lockgate_lock_acquire_duration_seconds_sum[5m]))
//	  / sum by (pattern) (rate(lockgate_lock_acquire_duration_seconds_count[5m]))
//	histogram_quantile(0.99, sum by (le, pattern) (rate(lockgate_lock_acquire_duration_seconds_bucket[5m])))
//
//	# release failure rate
//	sum by (pattern) (rate(lockgate_lock_releases_total{outcome="failed"}[5m]))
//	  / sum by (pattern) (rate(lockgate_lock_releases_total[5m]))
//
//	# renewal success rate
//	sum by (pattern) (rate(lockgate_lock_renewals_total{outcome="ok"}[5m]))
//	  / sum by (pattern) (rate(lockgate_lock_renewals_total[5m]))
//
//	# clock: the largest offset of any process
//	max(abs(lockgate_redis_clock_offset_seconds))
//
// # Spans
//
// Each Lock and TryLock call of a traced request (its context holds a
// recording span; a call outside one makes no root span of its own) is a
// span "lock <pattern>", a child of that span, from the call's start to
// its end, with attributes
// lockgate.pattern, lockgate.outcome, lockgate.attempts, lockgate.waited,
// lockgate.fence (when obtained), lockgate.permits (a Semaphore's count),
// lockgate.read (an RLock's) and error.type (the outcome, when not);
// unavailable and invalid set the status to Error.
//
// A waiter's span links to the holder's span: with Options, each lock
// stores the W3C traceparent of its holder's span (HolderTag: a field of
// the lock's hash, 55 bytes, only when the holder's context carries a
// sampled span), and a busy answer hands it to the waiter. So the trace of
// a slow request shows which request it waited for. Inspect shows the tag;
// TraceID reads its trace id.
//
// # Logs
//
// core logs lost locks and failed releases through its WithLogger (pattern
// and fence, never the key or the owner id); the HTTP and gRPC adapters log
// fail-open decisions the same way.
//
// # Cost
//
// Instruments are recorded with attribute sets cached per (pattern,
// outcome): an event allocates nothing for metrics once its set was seen.
// A Locker without an Observer pays nothing for this module (see the
// module's benchmark, BenchmarkLockUnlock).
package otellock
