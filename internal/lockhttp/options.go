package lockhttp

import (
	"log/slog"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// Options are the settings of an adapter configured with functional
// options (httplock, ginlock): those every adapter has (Setup, FailOpen,
// Logger) and its framework's: B is its busy answer, E its error answer,
// C its handle on a request for Skip, Path and Ctx. The adapter declares
// `type options = lockhttp.Options[...]` and `type Option func(*options)`,
// and each exported WithX, with its own doc, returns one of With's.
type Options[C, B, E any] struct {
	Setup    Setup // lock options and body bound, checked as given
	FailOpen bool
	Logger   *slog.Logger // nil until Configure sets slog.Default()
	Busy     B
	Error    E
	Skip     func(c C) bool                        // nil skips nothing
	Path     func(c C, name string) string         // {path.name}
	Ctx      func(c C, name string) (string, bool) // {ctx.name}
}

// With makes the options of Options[C, B, E]; the name each one gives a
// setting's error is the adapter's exported option's (WithWait).
type With[C, B, E any] struct{}

// Wait is WithWait: core.NoWait is a single attempt, 0 sets nothing,
// another negative value is an error.
func (With[C, B, E]) Wait(d time.Duration) func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) { o.Setup.Wait("WithWait", d) }
}

// TTL is WithTTL: 0 sets nothing, a value below core.MinTTL is an error.
func (With[C, B, E]) TTL(d time.Duration) func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) { o.Setup.TTL("WithTTL", d) }
}

// ReleaseTimeout is WithReleaseTimeout: 0 sets nothing, a negative value
// is an error.
func (With[C, B, E]) ReleaseTimeout(d time.Duration) func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) { o.Setup.ReleaseTimeout("WithReleaseTimeout", d) }
}

// LockOptions is WithLockOptions: appended in order; a nil or invalid one
// is an error.
func (With[C, B, E]) LockOptions(opts []core.LockOption) func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) { o.Setup.LockOptions("WithLockOptions", opts) }
}

// MaxBodySize is WithMaxBodySize: 0 sets nothing, a negative value is an
// error.
func (With[C, B, E]) MaxBodySize(n int64) func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) { o.Setup.MaxBodySize("WithMaxBodySize", n) }
}

// Limit is WithLimit: n requests of one key at once (a semaphore of n
// permits instead of the lock); n below 1 is an error.
func (With[C, B, E]) Limit(n int) func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) { o.Setup.Limit("WithLimit", n) }
}

// Shared is WithShared: the key's lock taken shared (a read lock); with
// WithLimit an error.
func (With[C, B, E]) Shared() func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) { o.Setup.Shared("WithShared") }
}

// Route is WithRoute: the pattern of the route the middleware serves, as
// the router writes it; "" checks nothing.
func (With[C, B, E]) Route(pattern string) func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) { o.Setup.RoutePattern("WithRoute", pattern) }
}

// FailOpen is WithFailOpen.
func (With[C, B, E]) FailOpen() func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) { o.FailOpen = true }
}

// Logger is WithLogger: nil keeps the default.
func (With[C, B, E]) Logger(l *slog.Logger) func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) {
		if l != nil {
			o.Logger = l
		}
	}
}

// Busy is WithBusyHandler: h replaces the busy answer when set (the
// adapter says whether its h is nil; nil keeps the default).
func (With[C, B, E]) Busy(h B, set bool) func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) {
		if set {
			o.Busy = h
		}
	}
}

// Error is WithErrorHandler, as Busy.
func (With[C, B, E]) Error(h E, set bool) func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) {
		if set {
			o.Error = h
		}
	}
}

// Skip is WithSkip: nil skips nothing.
func (With[C, B, E]) Skip(skip func(c C) bool) func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) { o.Skip = skip }
}

// Path is WithPathValue: nil keeps the default.
func (With[C, B, E]) Path(f func(c C, name string) string) func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) {
		if f != nil {
			o.Path = f
		}
	}
}

// Ctx is WithContextValue: nil keeps the default.
func (With[C, B, E]) Ctx(f func(c C, name string) (string, bool)) func(*Options[C, B, E]) {
	return func(o *Options[C, B, E]) {
		if f != nil {
			o.Ctx = f
		}
	}
}

// Compile is the start of an adapter's New(l, key, ...): noLocker for a
// nil l, else key compiled for HTTP (keyfunc.HTTP).
func Compile(l *core.Locker, key string, noLocker error) (*keyfunc.Template, error) {
	if l == nil {
		return nil, noLocker
	}
	return keyfunc.Compile(key, keyfunc.HTTP())
}

// Configure is an adapter's NewTemplate(l, t, opts...) up to the engine:
// noLocker for a nil l, t checked for HTTP (nil is an ErrBadTemplate
// error), each option applied in order (a nil one is an error naming its
// index), then the lock options combined (core.Combine). It returns the
// route and sets o.Logger to slog.Default() when no option set one.
func Configure[O ~func(*Options[C, B, E]), C, B, E any](o *Options[C, B, E], l *core.Locker, t *keyfunc.Template, opts []O, noLocker error) (Route, error) {
	if l == nil {
		return Route{}, noLocker
	}
	t, err := o.Setup.ForHTTP("key template", t)
	if err != nil {
		return Route{}, err
	}
	for i, opt := range opts {
		if opt == nil {
			return Route{}, o.Setup.Invalid("New", "option %d is nil", i)
		}
		opt(o)
	}
	route, err := o.Setup.Route(t, "lock options")
	if err != nil {
		return Route{}, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	LogConstant(o.Logger, o.Setup.adapter, route.Template)
	return route, nil
}

// Must returns v and panics if err is not nil: every adapter's Must.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
