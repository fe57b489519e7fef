package httplock

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// Option configures the middleware built by New and NewTemplate.
type Option func(*options)

// ErrorHandler writes the answer to a request that cannot be served: status
// is 400 (err is a *keyfunc.Error naming the part), 413 (body over
// WithMaxBodySize) or 503 (the lock failed; err is internal and must not be
// sent to the client).
type ErrorHandler func(w http.ResponseWriter, r *http.Request, status int, err error)

type options struct {
	lockOpts     []core.Option
	busy         http.Handler
	onError      ErrorHandler
	failOpen     bool
	logger       *slog.Logger
	maxBody      int64
	pathValue    func(r *http.Request, name string) string
	contextValue func(ctx context.Context, name string) (string, bool)
}

func defaultOptions() options {
	return options{
		busy:         http.HandlerFunc(defaultBusy),
		onError:      defaultError,
		maxBody:      keyfunc.DefaultMaxBodySize,
		pathValue:    func(r *http.Request, name string) string { return r.PathValue(name) },
		contextValue: keyfunc.ContextValue,
	}
}

// WithWait sets how long a request waits for a busy lock before the busy
// answer (429). 0 makes one attempt. Default: the Locker's (2s unless set
// with core.WithWait in core.New).
func WithWait(d time.Duration) Option {
	return func(o *options) { o.lockOpts = append(o.lockOpts, core.WithWait(d)) }
}

// WithTTL sets the lease time of the lock (renewed by the watchdog while the
// handler runs). Default: the Locker's (30s unless set in core.New).
func WithTTL(d time.Duration) Option {
	return func(o *options) { o.lockOpts = append(o.lockOpts, core.WithTTL(d)) }
}

// WithLockOptions passes further per-call options to core.Locker.Lock
// (core.WithRetry, core.WithoutWatchdog, ...). Default none.
func WithLockOptions(opts ...core.Option) Option {
	return func(o *options) { o.lockOpts = append(o.lockOpts, opts...) }
}

// WithBusyHandler replaces the answer to a request whose lock is still busy
// when the wait ends. The Retry-After header (whole seconds, at least 1) is
// already set when h runs. Default: 429 with {"error": "..."}.
func WithBusyHandler(h http.Handler) Option {
	return func(o *options) {
		if h != nil {
			o.busy = h
		}
	}
}

// WithErrorHandler replaces the 400, 413 and 503 answers. Default: that
// status with {"error": "..."}: the key error's text for 400 (it names the
// part, never the value), a fixed text for 413 and 503.
func WithErrorHandler(h ErrorHandler) Option {
	return func(o *options) {
		if h != nil {
			o.onError = h
		}
	}
}

// WithFailOpen makes a lock failure other than busy (Redis unreachable,
// Locker closed) run the handler without the lock, logging a warning,
// instead of answering 503. Default: fail closed (503, handler not run).
func WithFailOpen() Option {
	return func(o *options) { o.failOpen = true }
}

// WithLogger sets the logger of fail-open runs, lock failures and failed
// releases. Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithMaxBodySize bounds the body read when the key uses {body.*}, {form.*}
// or a bare name; a longer body is answered 413. Values below 1 are ignored.
// Default keyfunc.DefaultMaxBodySize (1 MiB).
func WithMaxBodySize(n int64) Option {
	return func(o *options) {
		if n > 0 {
			o.maxBody = n
		}
	}
}

// WithPathValue sets how {path.name} is read, for routers other than
// http.ServeMux; for chi: WithPathValue(chi.URLParam). Default
// (*http.Request).PathValue.
func WithPathValue(f func(r *http.Request, name string) string) Option {
	return func(o *options) {
		if f != nil {
			o.pathValue = f
		}
	}
}

// WithContextValue sets how {ctx.name} is read from the request context,
// for authentication middleware that store values under their own keys.
// Default keyfunc.ContextValue (values stored with keyfunc.WithValue).
func WithContextValue(f func(ctx context.Context, name string) (string, bool)) Option {
	return func(o *options) {
		if f != nil {
			o.contextValue = f
		}
	}
}
