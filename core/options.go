package core

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Limits checked on every call: a violation is ErrInvalid, and nothing is sent.
const (
	// MaxKeyLen is the longest lock name accepted, in bytes.
	MaxKeyLen = 1024
	// MinTTL is the shortest lease accepted by WithTTL and Extend.
	MinTTL = 50 * time.Millisecond
	// MaxTTL is the longest lease: a week (keeps validity arithmetic from overflow).
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

// NoWait as a wait budget makes Lock one attempt, like TryLock. Every adapter
// accepts it (where a zero wait means the Locker's default).
const NoWait time.Duration = -1

// Option configures a Locker in New. A LockOption given to New sets the default
// of every call; Locker-only Options (WithPrefix, ...) do not compile on Lock.
type Option interface {
	applyLocker(*lockerOptions)
}

// LockOption configures one Lock or TryLock call (given to New: their default).
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

	// the scripts' ttl and entry-life arguments, made for argsTTL (refreshScriptArgs)
	ttlArg   any
	entryArg any
	argsTTL  time.Duration

	err error // first invalid value seen
}

// lockerOptions are a Locker's settings: its calls' defaults and its own.
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

func (o *callOptions) fail(err error)   { o.err = cmp.Or(o.err, err) }
func (o *lockerOptions) fail(err error) { o.err = cmp.Or(o.err, err) }

// callOption is a LockOption: applied to a call, or to a Locker's defaults.
type callOption func(*callOptions)

func (f callOption) applyLock(o *callOptions)     { f(o) }
func (f callOption) applyLocker(o *lockerOptions) { f(&o.call) }

// lockerOption is an Option only.
type lockerOption func(*lockerOptions)

func (f lockerOption) applyLocker(o *lockerOptions) { f(o) }

// WithTTL sets the lease time, which the watchdog renews every TTL/3.
// Default 30s; below MinTTL or above MaxTTL it is ErrInvalid.
func WithTTL(d time.Duration) LockOption {
	return callOption(func(o *callOptions) {
		if err := checkTTL(d); err != nil {
			o.fail(err)
			return
		}
		o.ttl = d
	})
}

func checkTTL(d time.Duration) error {
	switch {
	case d < MinTTL:
		return invalidf("ttl %v is below the minimum %v", d, MinTTL)
	case d > MaxTTL:
		return invalidf("ttl %v is above the maximum %v", d, MaxTTL)
	}
	return nil
}

// WithWait sets how long Lock waits for a busy lock before it returns
// ErrNotObtained; an earlier ctx deadline wins. NoWait (or 0) makes one
// attempt. Default 2s; another negative wait is ErrInvalid.
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

// MaxHolderTagLen is the longest holder tag stored (a traceparent is 55 bytes).
const MaxHolderTagLen = 128

// MaxPatternLen is the longest pattern WithPattern accepts.
const MaxPatternLen = 256

// WithPattern names the kind of lock (e.g. "order:{user}:{voucher}") in the
// Events of the call and its lease: what metrics group by, never the key.
// Default UnnamedPattern; over MaxPatternLen it is cut; empty is ErrInvalid.
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

// WithoutWatchdog makes the lease fixed: never renewed, its context cancelled
// with ErrLockLost when its validity ends. Default: renewed by the watchdog.
func WithoutWatchdog() LockOption {
	return callOption(func(o *callOptions) { o.watchdog = false })
}

// WithWatchdog undoes a Locker-wide WithoutWatchdog for one call. Default: renewed.
func WithWatchdog() LockOption {
	return callOption(func(o *callOptions) { o.watchdog = true })
}

// WithAttemptTimeout bounds a single attempt (TryLock, WithWait(NoWait)) and,
// given to New, Extend, TTL, Inspect and ForceRelease, unless ctx's deadline
// is earlier: the call returns by then plus 50ms, with ErrUnavailable if Redis
// did not answer. Default 500ms; it must be positive (else ErrInvalid).
func WithAttemptTimeout(d time.Duration) LockOption {
	return callOption(func(o *callOptions) {
		if d <= 0 {
			o.fail(invalidf("attempt timeout %v is not positive", d))
			return
		}
		o.attemptTimeout = d
	})
}

// WithReleaseTimeout bounds how long Unlock waits for Redis, whatever the
// client's timeouts or ctx's cancellation (an ended request still releases).
// Unanswered in time, the release goes on in the background and Unlock returns
// ErrUnavailable; Unlock again to retry. Default 1s; it must be positive.
func WithReleaseTimeout(d time.Duration) LockOption {
	return callOption(func(o *callOptions) {
		if d <= 0 {
			o.fail(invalidf("release timeout %v is not positive", d))
			return
		}
		o.releaseTimeout = d
	})
}

// WithPrefix sets the prefix of the Locker's Redis keys and channels: at most
// MaxPrefixLen bytes, no '{' or '}' (else ErrInvalid). Default "lockgate:".
// See docs/design.md, "Redis layout".
func WithPrefix(p string) Option {
	return lockerOption(func(o *lockerOptions) {
		if len(p) > MaxPrefixLen {
			o.fail(invalidf("prefix is %d bytes, over the limit of %d", len(p), MaxPrefixLen))
			return
		}
		if strings.ContainsAny(p, "{}") {
			o.fail(invalidf("prefix %q contains a brace", p))
			return
		}
		o.prefix = p
	})
}

// WithObserver sets the hook told of every lock event. Default none.
func WithObserver(obs Observer) Option {
	return lockerOption(func(o *lockerOptions) { o.observer = obs })
}

// WithHolderTag sets a function of the Lock call's ctx whose answer is stored
// with the lock, shown to busy callers (Event.HolderTag) and by Inspect; over
// MaxHolderTagLen or with '|' it is not stored. Default none.
func WithHolderTag(fn func(ctx context.Context) string) Option {
	return lockerOption(func(o *lockerOptions) { o.tag = fn })
}

// WithLogger sets where the Locker warns of what it cannot return to a caller
// (a policy other than noeviction, lost locks, failed releases), naming pattern
// and fence, never key or owner. Default slog.Default() at the time of report.
func WithLogger(l *slog.Logger) Option {
	return lockerOption(func(o *lockerOptions) { o.logger = l })
}

// WithDriftFactor sets the clock-drift allowance: validity = sent + TTL −
// (TTL·f + 2ms). Default 0.01; outside [0, 0.5] it is ErrInvalid.
func WithDriftFactor(f float64) Option {
	return lockerOption(func(o *lockerOptions) {
		if f < 0 || f > 0.5 {
			o.fail(invalidf("drift factor %v outside [0, 0.5]", f))
			return
		}
		o.driftFactor = f
	})
}

// WithFenceWindow sets how long a Cluster slot's last fence (shared by the
// slot's names) is kept after the acquisition that issued it. Default 10m;
// below 1s it is ErrInvalid. See docs/fencing.md for what it bounds.
func WithFenceWindow(d time.Duration) Option {
	return lockerOption(func(o *lockerOptions) {
		if d < time.Second {
			o.fail(invalidf("fence window %v is below 1s", d))
			return
		}
		o.fenceWindow = d
	})
}

// WithoutCoalescing sends every acquire and release as a command of its own.
// Default: calls arriving while four are in flight (on a Cluster client, to
// the same master) go as one pipeline. See docs/internals.md, "Coalescing".
func WithoutCoalescing() Option {
	return lockerOption(func(o *lockerOptions) { o.noCoalesce = true })
}

// WithReplicaAck makes every grant and renewal wait for n replicas (WAIT). An
// unacknowledged grant is released and Lock fails with ErrNotReplicated (an
// ErrUnavailable); an unacknowledged renewal does not count. Choose n below the
// replicas normally online. Default: none. n must be at least 1 and timeout
// from 1ms to below the client's ReadTimeout, else ErrInvalid from New.
// See docs/topologies.md, "Choosing a topology".
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

// WithSentinelAddrs gives a Sentinel failover client's sentinel addresses
// (FailoverOptions.SentinelAddrs), so that a call finding them all refusing
// ends at once with ErrUnavailable naming it, not at its budget. Default:
// none. ErrInvalid from New for another client or an empty address.
// See docs/topologies.md, "A refused dial during a failover".
func WithSentinelAddrs(addrs ...string) Option {
	return lockerOption(func(o *lockerOptions) {
		if slices.Contains(addrs, "") {
			o.fail(invalidf("WithSentinelAddrs: an empty address"))
			return
		}
		o.sentinels = slices.Clone(addrs)
	})
}

// Combine checks opts and returns one LockOption applying them in order, so
// adapters fail at setup on a bad option. Errors: the first one's ErrInvalid.
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
