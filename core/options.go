package core

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Limits enforced on every call; a violation is an ErrInvalid error and
// nothing is sent to Redis.
const (
	// MaxKeyLen is the longest lock name accepted, in bytes.
	MaxKeyLen = 1024
	// MinTTL is the shortest lease accepted by WithTTL and Extend.
	MinTTL = 50 * time.Millisecond
	// MaxTTL is the longest: a week (a longer hold is renewed by the
	// watchdog, and validity arithmetic stays far from overflowing).
	MaxTTL = 7 * 24 * time.Hour
	// MaxPrefixLen is the longest key prefix accepted by WithPrefix.
	MaxPrefixLen = 128
)

// Defaults of a Locker built without options.
const (
	DefaultTTL            = 30 * time.Second
	DefaultWait           = 2 * time.Second
	DefaultReleaseTimeout = time.Second
	DefaultAttemptTimeout = 500 * time.Millisecond
	DefaultPrefix         = "lockgate:"
	DefaultFenceWindow    = 10 * time.Minute
	DefaultDriftFactor    = 0.01
	DefaultDriftFloor     = 2 * time.Millisecond
)

// NoWait, given as a wait budget, makes a single attempt: Lock then behaves
// like TryLock. It is the one spelling every adapter's configuration
// accepts (where a zero wait means "the Locker's default").
const NoWait time.Duration = -1

// Option configures a Locker in New. Every LockOption is also an Option:
// given to New it sets the default of every Lock and TryLock. Options that
// only make sense for a Locker (WithPrefix, WithObserver, ...) are Options
// but not LockOptions, so passing one to Lock does not compile.
type Option interface {
	applyLocker(*lockerOptions)
}

// LockOption configures one Lock or TryLock call (or, given to New, the
// default of all of them).
type LockOption interface {
	Option
	applyLock(*callOptions)
}

// callOptions are the settings of one Lock or TryLock call.
type callOptions struct {
	ttl            time.Duration
	wait           time.Duration // 0: one attempt
	watchdog       bool
	releaseTimeout time.Duration
	attemptTimeout time.Duration // WithAttemptTimeout
	pattern        string        // WithPattern: what observations name the lock by

	// ttl and a waiter's queue entry lifetime in ms as strings, the
	// scripts' arguments, made once per option set (refreshScriptArgs);
	// argsTTL is the ttl they were made for.
	ttlArg   any
	entryArg any
	argsTTL  time.Duration

	err error // first invalid value seen
}

// lockerOptions are the settings of a Locker: the defaults of its calls and
// its own.
type lockerOptions struct {
	call        callOptions
	prefix      string
	observer    Observer
	tag         func(context.Context) string
	logger      *slog.Logger
	driftFactor float64
	fenceWindow time.Duration
	noCoalesce  bool
	ackN        int           // WithReplicaAck: replicas to wait for (0: none)
	ackTimeout  time.Duration // WithReplicaAck: how long
	sentinels   []string      // WithSentinelAddrs
	mutants     string        // defects put back, for tests' controls (export_test.go)
	err         error
}

func defaultLockerOptions() lockerOptions {
	return lockerOptions{
		call: callOptions{
			ttl:            DefaultTTL,
			wait:           DefaultWait,
			watchdog:       true,
			releaseTimeout: DefaultReleaseTimeout,
			attemptTimeout: DefaultAttemptTimeout,
			pattern:        UnnamedPattern,
		},
		prefix:      DefaultPrefix,
		driftFactor: DefaultDriftFactor,
		fenceWindow: DefaultFenceWindow,
	}
}

func (o *callOptions) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

func (o *lockerOptions) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// callOption is a LockOption: applied to a call, or to a Locker's defaults.
type callOption func(*callOptions)

func (f callOption) applyLock(o *callOptions)     { f(o) }
func (f callOption) applyLocker(o *lockerOptions) { f(&o.call) }

// lockerOption is an Option only.
type lockerOption func(*lockerOptions)

func (f lockerOption) applyLocker(o *lockerOptions) { f(o) }

// WithTTL sets the lease time: how long the lock lives in Redis without a
// renewal. While a lease is held the watchdog renews it every TTL/3.
// Default 30s. A TTL below MinTTL or above MaxTTL is an ErrInvalid error.
func WithTTL(d time.Duration) LockOption {
	return callOption(func(o *callOptions) {
		if err := checkTTL(d); err != nil {
			o.fail(err)
			return
		}
		o.ttl = d
	})
}

// checkTTL is the ErrInvalid error of a lease time out of [MinTTL, MaxTTL].
func checkTTL(d time.Duration) error {
	switch {
	case d < MinTTL:
		return invalidf("ttl %v is below the minimum %v", d, MinTTL)
	case d > MaxTTL:
		return invalidf("ttl %v is above the maximum %v", d, MaxTTL)
	}
	return nil
}

// WithWait sets the wait budget of Lock: how long it waits for a busy lock
// before returning ErrNotObtained. The context's deadline, when earlier,
// wins. NoWait (or 0) makes Lock a single attempt like TryLock. Default 2s.
// Another negative wait is an ErrInvalid error.
func WithWait(d time.Duration) LockOption {
	return callOption(func(o *callOptions) {
		switch {
		case d == NoWait:
			o.wait = 0
		case d < 0:
			o.fail(invalidf("wait %v is negative (use core.NoWait for a single attempt)", d))
		default:
			o.wait = d
		}
	})
}

// UnnamedPattern is the pattern of a lock taken without WithPattern.
const UnnamedPattern = "unnamed"

// MaxHolderTagLen is the longest tag WithHolderTag's function may return
// for it to be stored (a W3C traceparent is 55 bytes).
const MaxHolderTagLen = 128

// MaxPatternLen is the longest pattern WithPattern accepts.
const MaxPatternLen = 256

// WithPattern names the kind of lock in every Event of the call and of the
// lease it returns (Event.Pattern), for example "order:{user}:{voucher}":
// what metrics and traces group by, where the key itself carries user data
// and is unbounded. The adapters set it from their key template. Default
// UnnamedPattern. One over MaxPatternLen bytes is cut to that length; an
// empty pattern is an ErrInvalid error.
func WithPattern(p string) LockOption {
	return callOption(func(o *callOptions) {
		if p == "" {
			o.fail(invalidf("empty pattern"))
			return
		}
		if len(p) > MaxPatternLen {
			p = p[:MaxPatternLen]
		}
		o.pattern = p
	})
}

// WithoutWatchdog makes the lease fixed: it is not renewed and simply
// expires after its TTL; its context is cancelled with ErrLockLost when the
// validity ends. Default: renewed by the watchdog.
func WithoutWatchdog() LockOption {
	return callOption(func(o *callOptions) { o.watchdog = false })
}

// WithWatchdog undoes WithoutWatchdog for one call when the Locker's
// default is a fixed lease. Default: renewed by the watchdog.
func WithWatchdog() LockOption {
	return callOption(func(o *callOptions) { o.watchdog = true })
}

// WithAttemptTimeout bounds a single attempt — TryLock, Lock with
// WithWait(NoWait) — and, given to New, Extend, TTL, Inspect and
// ForceRelease too, when ctx has no earlier deadline: the call returns by
// then (plus at most 50ms) whatever the client's timeouts, with an
// ErrUnavailable error if Redis did not answer. Default 500ms; it must be
// positive.
func WithAttemptTimeout(d time.Duration) LockOption {
	return callOption(func(o *callOptions) {
		if d <= 0 {
			o.fail(invalidf("attempt timeout %v is not positive", d))
			return
		}
		o.attemptTimeout = d
	})
}

// WithReleaseTimeout bounds how long Unlock waits for the release to be
// answered by Redis, whatever the client's timeouts and whatever the context
// passed to Unlock (the release is detached from its cancellation, so a
// request that is already over still releases its lock). A release not
// answered in time goes on in the background and Unlock returns an
// ErrUnavailable error; calling Unlock again retries it. Default 1s; it
// must be positive.
func WithReleaseTimeout(d time.Duration) LockOption {
	return callOption(func(o *callOptions) {
		if d <= 0 {
			o.fail(invalidf("release timeout %v is not positive", d))
			return
		}
		o.releaseTimeout = d
	})
}

// WithPrefix sets the prefix of every Redis key and channel this Locker
// uses. It must not contain '{' or '}' (the lock name is the Cluster hash
// tag) and is at most MaxPrefixLen bytes. Default "lockgate:".
func WithPrefix(p string) Option {
	return lockerOption(func(o *lockerOptions) {
		if len(p) > MaxPrefixLen {
			o.fail(invalidf("prefix is %d bytes, over the limit of %d", len(p), MaxPrefixLen))
			return
		}
		for i := 0; i < len(p); i++ {
			if p[i] == '{' || p[i] == '}' {
				o.fail(invalidf("prefix %q contains a brace", p))
				return
			}
		}
		o.prefix = p
	})
}

// WithObserver sets the hook told of every acquisition, release, renewal,
// extension and loss (for metrics and logs). Default none.
func WithObserver(obs Observer) Option {
	return lockerOption(func(o *lockerOptions) { o.observer = obs })
}

// WithHolderTag sets a function whose answer for the Lock call's context
// is stored with each lock this Locker takes (and its queue entry while it
// waits), handed to callers that find the lock busy (Event.HolderTag) and
// shown by Inspect. The otel module's tag is the caller's W3C traceparent,
// so that a waiter's span links to the holder's. A tag over MaxHolderTagLen
// or containing '|' is not stored. Default none: nothing extra is stored.
func WithHolderTag(fn func(ctx context.Context) string) Option {
	return lockerOption(func(o *lockerOptions) { o.tag = fn })
}

// WithLogger sets where the Locker reports what it cannot return to a
// caller: a server configuration that endangers locks (an eviction policy
// other than noeviction), locks lost, and releases that failed, in the
// foreground or the background (Warn). Lines carry the lock's pattern and
// fence, never its key or owner id. Default slog.Default() at the time of
// the report.
func WithLogger(l *slog.Logger) Option {
	return lockerOption(func(o *lockerOptions) { o.logger = l })
}

// WithDriftFactor sets the clock-drift allowance subtracted from a lease's
// validity: validity = sent + TTL − (TTL·f + 2ms), as in the Redlock
// algorithm. Default 0.01. Values outside [0, 0.5] are ErrInvalid.
func WithDriftFactor(f float64) Option {
	return lockerOption(func(o *lockerOptions) {
		if f < 0 || f > 0.5 {
			o.fail(invalidf("drift factor %v outside [0, 0.5]", f))
			return
		}
		o.driftFactor = f
	})
}

// WithFenceWindow sets how long the last fence issued in a Cluster hash
// slot (every lock name of the slot shares it) is kept in Redis after the
// acquisition that issued it (see docs/fencing.md). Default 10m; at least
// 1s.
func WithFenceWindow(d time.Duration) Option {
	return lockerOption(func(o *lockerOptions) {
		if d < time.Second {
			o.fail(invalidf("fence window %v is below 1s", d))
			return
		}
		o.fenceWindow = d
	})
}

// WithoutCoalescing makes every acquire and release of the Locker a
// command of its own on a pooled connection. Default: on a plain client (a
// master or a Sentinel failover client), a caller is sent at once while
// fewer than four of the Locker's calls are in flight; the calls that
// arrive while four are in flight are sent together as one pipeline when
// one is answered. (A Cluster client is never coalesced.)
func WithoutCoalescing() Option {
	return lockerOption(func(o *lockerOptions) { o.noCoalesce = true })
}

// WithReplicaAck makes every grant and renewal wait for n replicas to
// acknowledge it (Redis's WAIT n timeout, in the same round trip as the
// script). A grant fewer replicas acknowledged within timeout is released
// and Lock fails with ErrNotReplicated (which matches ErrUnavailable); an
// unacknowledged renewal does not count, so a lease whose renewals keep
// failing so is lost at the end of its validity. A lock handed over by a
// release costs one round trip more. It narrows, does not close, the
// window in which a failover loses a lock; a re-syncing replica
// acknowledges nothing, so choose n below the replicas normally online
// (docs/topologies.md). Default: no acknowledgement. n must be at least 1
// and timeout at least 1ms (WAIT 0 would block forever) and below the
// client's ReadTimeout; otherwise ErrInvalid from New.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return lockerOption(func(o *lockerOptions) {
		switch {
		case n < 1:
			o.fail(invalidf("replica ack count %d is below 1", n))
		case timeout < time.Millisecond:
			o.fail(invalidf("replica ack timeout %v is below 1ms", timeout))
		default:
			o.ackN, o.ackTimeout = n, timeout
		}
	})
}

// WithSentinelAddrs names the sentinels of a Sentinel failover client
// (redis.NewFailoverClient: pass its FailoverOptions.SentinelAddrs), which
// go-redis keeps to itself. With them, a call that finds every sentinel
// refusing connections ends at once with ErrUnavailable naming the refusal
// (one dial of each, about 100ms after the call began), as a call to a
// refusing master does; without them such a call ends with its budget,
// saying only that nothing answered. A sentinel that accepts is enough for
// the call to go on. Default: none. Errors from New: ErrInvalid when the
// client is not a Sentinel failover client or an address is empty.
func WithSentinelAddrs(addrs ...string) Option {
	return lockerOption(func(o *lockerOptions) {
		if slices.Contains(addrs, "") {
			o.fail(invalidf("WithSentinelAddrs: an empty address"))
			return
		}
		o.sentinels = slices.Clone(addrs)
	})
}

// Combine checks opts and returns one LockOption that applies them in
// order. Adapters call it when a route is set up, so that a bad per-route
// option is a setup error rather than a failure of every request. Errors:
// the first invalid option, as an ErrInvalid error.
func Combine(opts ...LockOption) (LockOption, error) {
	var probe callOptions
	for _, opt := range opts {
		if opt == nil {
			return nil, invalidf("nil option")
		}
		opt.applyLock(&probe)
	}
	if probe.err != nil {
		return nil, probe.err
	}
	list := append([]LockOption(nil), opts...)
	return callOption(func(o *callOptions) {
		for _, opt := range list {
			opt.applyLock(o)
		}
	}), nil
}

// refreshScriptArgs remakes the TTL's script arguments if the TTL changed.
func (o *callOptions) refreshScriptArgs() {
	if o.ttlArg == nil || o.argsTTL != o.ttl {
		o.ttlArg, o.entryArg, o.argsTTL = ms(o.ttl), ms(entryTTL(o.ttl)), o.ttl
	}
}

// holderTag is a tag function's answer as the acquire script's argument:
// "" (store none) when it is too long or holds the entry separator.
func holderTag(t string) any {
	if len(t) > MaxHolderTagLen || strings.IndexByte(t, '|') >= 0 {
		return ""
	}
	return t
}
