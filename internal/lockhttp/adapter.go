package lockhttp

import (
	"context"
	"sync"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// What the adapters' exported constructors share: each one is a line
// over these, and keeps only its own types and doc comment.

// NewFromKey is an adapter's New(l, key, opts...): noLocker for a nil l,
// else key compiled for HTTP (Compile) and handed with opts to
// newTemplate, the adapter's NewTemplate. On error the result is T's
// zero value (a nil middleware).
func NewFromKey[T, O any](l *core.Locker, key string, opts []O, noLocker error, newTemplate func(*core.Locker, *keyfunc.Template, ...O) (T, error)) (T, error) {
	t, err := Compile(l, key, noLocker)
	if err != nil {
		var zero T
		return zero, err
	}
	return newTemplate(l, t, opts...)
}

// OptionsEngine is an adapter's NewTemplate(l, t, opts...) up to its
// middleware: o (the adapter's defaults) configured by Configure, then the
// engine on shim with o's fail-open and logger, logging an unfillable
// path placeholder once per route. C and R are given, the rest inferred:
// OptionsEngine[*gin.Context, struct{}](&m.o, l, t, opts, ErrNoLocker, m).
func OptionsEngine[C, R any, O ~func(*Options[X, B, E]), X, B, E any](o *Options[X, B, E], l *core.Locker, t *keyfunc.Template, opts []O, noLocker error, shim Shim[C, R]) (Engine[C, R], error) {
	route, err := Configure(o, l, t, opts, noLocker)
	if err != nil {
		return Engine[C, R]{}, err
	}
	return Engine[C, R]{Locker: l, Route: route, FailOpen: o.FailOpen, Logger: o.Logger, Shim: shim, Logged: new(sync.Map)}, nil
}

// First is the config of an adapter's New(config ...Config) (fiberlock):
// the first one given, or the zero config; the others are not used.
func First[T any](config []T) T {
	var cfg T
	if len(config) > 0 {
		cfg = config[0]
	}
	return cfg
}

// ContextValue is the default {ctx.name} of an adapter whose framework
// keeps request values of its own (Gin's c.Get, Echo's c.Get, Fiber's
// c.Locals): stored, the framework's value under name, when it is a
// string, an integer, a boolean or a fmt.Stringer (keyfunc.FormatValue),
// else the value stored in the request's context ctx with
// keyfunc.WithValue (keyfunc.ContextValue).
func ContextValue(stored any, ctx context.Context, name string) (string, bool) {
	if s, ok := keyfunc.FormatValue(stored); ok {
		return s, true
	}
	return keyfunc.ContextValue(ctx, name)
}
