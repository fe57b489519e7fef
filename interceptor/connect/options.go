package connectlock

import (
	"log/slog"
	"time"

	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/rpclock"
)

// Rule is a Go-side lock rule for one procedure, the equivalent of a
// (lockgate.v1.lock) annotation; it has the fields and the meaning of
// grpclock.Rule. Given with WithRule, it wins over the procedure's
// annotation. Every field is checked by New: a bad value is an error of
// New naming the procedure and the field, whatever FailOpen says.
type Rule struct {
	// Key is the lock name template (keyfunc language, see the package doc),
	// typed placeholders included ({user_id:int}). Required.
	Key string
	// Wait is how long a call waits for a busy lock. Optional. 0 (the
	// default) keeps the Locker's wait (core.DefaultWait, 2s, unless
	// configured); core.NoWait makes a single attempt; any other negative
	// value is an error of New.
	Wait time.Duration
	// TTL is the lease time. Optional. 0 (the default) keeps the Locker's
	// TTL (core.DefaultTTL, 30s, unless configured); when set it must be at
	// least core.MinTTL (a smaller or negative value is an error of New).
	TTL time.Duration
	// FailOpen runs the handler without the lock when Redis is unavailable
	// (core.ErrUnavailable) and only then: never when the Locker is closed,
	// the server unsupported, the input invalid or the call's context over.
	// Optional. Default false: the call fails with connect.CodeUnavailable.
	FailOpen bool
	// Options are passed to every Lock of this rule after WithLockOptions,
	// Wait and TTL, so they win (for example core.WithoutWatchdog() or
	// core.WithReleaseTimeout(2*time.Second)). Optional. New checks them
	// with core.Combine: an invalid or nil option is an error of New.
	Options []core.LockOption
	// Limit admits up to Limit calls of one key at once instead of one at
	// a time: each call holds one of Limit permits of the semaphore named
	// by the key (core.Locker.Semaphore), across servers; Limit: 3 with Key
	// "export:{tenant}" is at most 3 exports per tenant at once. A call over
	// the limit waits as for a busy lock, then fails with
	// connect.CodeResourceExhausted. Every method locking one key must give the same
	// Limit. Optional. 0 (the default) takes the lock; a negative value is
	// an error of New. The annotation's field is limit.
	Limit int
	// Shared takes the key's lock shared with the other Shared calls of the
	// key (core.Locker.RLock, a read lock) instead of exclusively: a
	// GetVoucher with Shared: true and Key "voucher:{voucher_id}" runs beside
	// the other reads of the voucher, while a method locking the same key
	// without it (Restock, the writer) excludes them and is not overtaken by
	// reads that come after it. A call that cannot enter waits as for a busy
	// lock, then fails with connect.CodeResourceExhausted; every other answer
	// is the lock's. A Redlock Locker has no shared locks: such a call fails
	// with connect.CodeUnavailable, logged. Optional. Default false (the lock,
	// exclusive); with a Limit an error of New. The annotation's field is
	// shared.
	Shared bool
}

// Option configures New. A bad value given to an Option (a nil registry,
// a non-positive release timeout, an invalid core option) is an error of
// New.
type Option func(*options)

// options is the storage the Options set, shared with grpclock
// (internal/rpclock): each Option below is one call of its methods.
type options = rpclock.Options

// WithRule sets the lock rule of procedure, written as Connect does
// ("/package.Service/Method", as in connect.Spec.Procedure and the
// generated ...Procedure constants). It replaces the procedure's
// (lockgate.v1.lock) annotation, if any, and an earlier WithRule for the
// same procedure. New fails when no service of the registry (WithFiles)
// has the method or the rule is invalid for it. Default: no Go rules.
func WithRule(procedure string, r Rule) Option {
	return func(o *options) { o.SetRule(procedure, rpclock.Rule(r)) }
}

// WithFiles sets the registry whose service descriptors New reads
// annotations from and resolves Go rules against, for services not linked
// into protoregistry.GlobalFiles (descriptors loaded at run time). Message
// types of server-streaming requests are then built with dynamicpb when
// they are not in protoregistry.GlobalTypes. A nil registry is an error of
// New. Default protoregistry.GlobalFiles.
func WithFiles(files *protoregistry.Files) Option {
	return func(o *options) { o.SetFiles(files) }
}

// WithLockOptions adds core lock options to every Lock the interceptor
// makes, before the rule's own Wait, TTL and Options (which therefore win).
// New checks them with core.Combine: an invalid or nil option is an error
// of New. Locker-wide settings (prefix, observer, ...) belong to core.New
// and do not compile here. Default none: the Locker's defaults apply.
func WithLockOptions(opts ...core.LockOption) Option {
	return func(o *options) { o.AddLockOptions(opts...) }
}

// WithLogger sets where the interceptor reports what it does not send to
// clients: fail-open calls, failed releases, internal errors. nil means
// slog.Default() at the time of New. Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.SetLogger(l) }
}

// WithReleaseTimeout bounds the Unlock sent after a handler returns: it is
// core.WithReleaseTimeout(d) added to every Lock, in the place of this
// option among WithLockOptions (a rule's Options may override it). The
// release is detached from the call's cancellation, so a call the client
// cancelled still releases its lock; one that Redis does not answer within
// d is logged and the lock expires after its TTL. d must be positive (0 or
// a negative value is an error of New). Default: the Locker's release
// timeout (core.DefaultReleaseTimeout, 1s, unless configured).
func WithReleaseTimeout(d time.Duration) Option {
	return func(o *options) { o.AddReleaseTimeout(d) }
}
