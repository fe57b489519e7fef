package core

import (
	"time"
)

// Limits enforced on every call; a violation is an ErrInvalid error and
// nothing is sent to Redis.
const (
	// MaxKeyLen is the longest lock name accepted, in bytes.
	MaxKeyLen = 1024
	// MinTTL is the shortest lease accepted by WithTTL.
	MinTTL = 50 * time.Millisecond
	// MaxPrefixLen is the longest key prefix accepted by WithPrefix.
	MaxPrefixLen = 128
)

// Defaults of a Locker built without options.
const (
	DefaultTTL         = 30 * time.Second
	DefaultWait        = 2 * time.Second
	DefaultPrefix      = "lockgate:"
	DefaultFenceWindow = 10 * time.Minute
	DefaultDriftFactor = 0.01
	DefaultDriftFloor  = 2 * time.Millisecond
)

// Option configures a Locker (passed to New: the defaults of all its locks)
// or a single Lock/TryLock call. Options marked "Locker only" are rejected
// with ErrInvalid when passed to Lock or TryLock.
type Option func(*options)

type options struct {
	ttl         time.Duration
	wait        time.Duration
	retry       RetryFactory
	watchdog    bool
	prefix      string
	observer    Observer
	driftFactor float64
	fenceWindow time.Duration

	// ttl and fenceWindow in ms as boxed strings, the scripts' arguments,
	// made once per option set (box).
	ttlArg, windowArg     any
	ttlBoxed, windowBoxed time.Duration

	lockerOnly string // name of the first Locker-only option applied
	err        error  // first invalid value seen
}

func defaultOptions() options {
	return options{
		ttl:         DefaultTTL,
		wait:        DefaultWait,
		retry:       ExponentialBackoff(50*time.Millisecond, time.Second),
		watchdog:    true,
		prefix:      DefaultPrefix,
		driftFactor: DefaultDriftFactor,
		fenceWindow: DefaultFenceWindow,
	}
}

func (o *options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

func (o *options) locker(name string) {
	if o.lockerOnly == "" {
		o.lockerOnly = name
	}
}

// WithTTL sets the lease time: how long the lock lives in Redis without a
// renewal. While a lease is held the watchdog renews it every TTL/3.
// Default 30s. A TTL below MinTTL is an ErrInvalid error.
func WithTTL(d time.Duration) Option {
	return func(o *options) {
		if d < MinTTL {
			o.fail(invalidf("ttl %v is below the minimum %v", d, MinTTL))
			return
		}
		o.ttl = d
	}
}

// WithWait sets the wait budget of Lock: how long it waits for a busy lock
// before returning ErrNotObtained. The context's deadline, when earlier,
// wins. 0 makes Lock a single attempt like TryLock. Default 2s. A negative
// wait is an ErrInvalid error.
func WithWait(d time.Duration) Option {
	return func(o *options) {
		if d < 0 {
			o.fail(invalidf("wait %v is negative", d))
			return
		}
		o.wait = d
	}
}

// WithRetry sets how a waiting Lock retries between release notifications.
// Default ExponentialBackoff(50ms, 1s). A nil factory means NoRetry.
func WithRetry(f RetryFactory) Option {
	return func(o *options) {
		if f == nil {
			f = NoRetry()
		}
		o.retry = f
	}
}

// WithoutWatchdog makes the lease fixed: it is not renewed and simply
// expires after its TTL; its context is cancelled with ErrLockLost when the
// validity ends. Default: renewed by the watchdog.
func WithoutWatchdog() Option {
	return func(o *options) { o.watchdog = false }
}

// WithWatchdog undoes WithoutWatchdog for one call when the Locker's
// default is a fixed lease. Default: renewed by the watchdog.
func WithWatchdog() Option {
	return func(o *options) { o.watchdog = true }
}

// WithPrefix sets the prefix of every Redis key and channel this Locker
// uses. It must not contain '{' or '}' (the lock name is the Cluster hash
// tag) and is at most MaxPrefixLen bytes. Default "lockgate:". Locker only.
func WithPrefix(p string) Option {
	return func(o *options) {
		o.locker("WithPrefix")
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
	}
}

// WithObserver sets the hook told of every acquisition, release, renewal
// and loss (for metrics and logs). Default none. Locker only.
func WithObserver(obs Observer) Option {
	return func(o *options) {
		o.locker("WithObserver")
		o.observer = obs
	}
}

// WithDriftFactor sets the clock-drift allowance subtracted from a lease's
// validity: validity = sent + TTL − (TTL·f + 2ms), as in the Redlock
// algorithm. Default 0.01. Values outside [0, 0.5] are ErrInvalid.
// Locker only.
func WithDriftFactor(f float64) Option {
	return func(o *options) {
		o.locker("WithDriftFactor")
		if f < 0 || f > 0.5 {
			o.fail(invalidf("drift factor %v outside [0, 0.5]", f))
			return
		}
		o.driftFactor = f
	}
}

// WithFenceWindow sets how long the last fence of a lock name is kept in
// Redis after the acquisition that issued it (see the README's "Fencing").
// Default 10m; at least 1s. Locker only.
func WithFenceWindow(d time.Duration) Option {
	return func(o *options) {
		o.locker("WithFenceWindow")
		if d < time.Second {
			o.fail(invalidf("fence window %v is below 1s", d))
			return
		}
		o.fenceWindow = d
	}
}

// box refreshes the scripts' boxed arguments if ttl or fenceWindow changed.
func (o *options) box() {
	if o.ttlArg == nil || o.ttlBoxed != o.ttl {
		o.ttlArg, o.ttlBoxed = ms(o.ttl), o.ttl
	}
	if o.windowArg == nil || o.windowBoxed != o.fenceWindow {
		o.windowArg, o.windowBoxed = ms(o.fenceWindow), o.fenceWindow
	}
}
