package grpclock

import (
	"log/slog"
	"time"

	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/lockgate/lockgate/core"
)

// DefaultReleaseTimeout bounds the Unlock sent after a handler returns.
const DefaultReleaseTimeout = 5 * time.Second

// Rule is a Go-side lock rule for one method, the equivalent of a
// (lockgate.v1.lock) annotation. Given with WithRule, it wins over the
// method's annotation.
type Rule struct {
	// Key is the lock name template (keyfunc language, see the package doc).
	// Required.
	Key string
	// Wait is how long a call waits for a busy lock. Optional. Default: the
	// Locker's wait (core.DefaultWait, 2s, unless configured). For a single
	// attempt, add core.WithWait(0) to Options.
	Wait time.Duration
	// TTL is the lease time. Optional. Default: the Locker's TTL
	// (core.DefaultTTL, 30s, unless configured). At least core.MinTTL.
	TTL time.Duration
	// FailOpen runs the handler without the lock when Redis is unreachable.
	// Optional. Default false: the call fails with codes.Unavailable.
	FailOpen bool
	// Options are passed to every Lock of this rule after Wait and TTL (for
	// example core.WithWait(0) or core.WithoutWatchdog()). Optional.
	Options []core.Option
}

// Option configures New.
type Option func(*options)

type options struct {
	rules          map[string]Rule
	order          []string // full method names of rules, in the order given
	files          *protoregistry.Files
	types          *protoregistry.Types
	lockOpts       []core.Option
	logger         *slog.Logger
	releaseTimeout time.Duration
}

func defaultOptions() options {
	return options{
		rules:          map[string]Rule{},
		files:          protoregistry.GlobalFiles,
		types:          protoregistry.GlobalTypes,
		releaseTimeout: DefaultReleaseTimeout,
	}
}

// WithRule sets the lock rule of the method fullMethod, written as gRPC
// does ("/package.Service/Method", as in grpc.UnaryServerInfo.FullMethod).
// It replaces the method's (lockgate.v1.lock) annotation, if any, and an
// earlier WithRule for the same method. New fails when no registered
// service has the method or the rule is invalid for it. Default: no Go
// rules.
func WithRule(fullMethod string, r Rule) Option {
	return func(o *options) {
		if _, ok := o.rules[fullMethod]; !ok {
			o.order = append(o.order, fullMethod)
		}
		o.rules[fullMethod] = r
	}
}

// WithFiles sets the registry whose service descriptors New reads
// annotations from and resolves Go rules against, for services not linked
// into protoregistry.GlobalFiles (descriptors loaded at run time). Message
// types of server-streaming requests are then built with dynamicpb when
// they are not in protoregistry.GlobalTypes. Default
// protoregistry.GlobalFiles.
func WithFiles(files *protoregistry.Files) Option {
	return func(o *options) {
		if files != nil {
			o.files = files
		}
	}
}

// WithLockOptions adds core options to every Lock the interceptor makes,
// before the rule's own Wait, TTL and Options (which therefore win).
// Default none: the Locker's defaults apply.
func WithLockOptions(opts ...core.Option) Option {
	return func(o *options) { o.lockOpts = append(o.lockOpts, opts...) }
}

// WithLogger sets where the interceptor reports what it does not send to
// clients: fail-open calls, failed releases, internal errors. Default
// slog.Default() at the time of the call.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithReleaseTimeout bounds the Unlock sent after a handler returns (the
// lock expires after its TTL anyway if the release cannot be sent). Values
// of d <= 0 are ignored. Default DefaultReleaseTimeout (5s).
func WithReleaseTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.releaseTimeout = d
		}
	}
}
