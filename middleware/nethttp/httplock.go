package httplock

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/lockhttp"
	"github.com/lockgate/lockgate/keyfunc"
)

// ErrNoLocker is returned by New and NewTemplate for a nil Locker. It
// matches core.ErrInvalid.
var ErrNoLocker = fmt.Errorf("httplock: nil Locker: %w", core.ErrInvalid)

type middleware struct {
	l        *core.Locker
	o        options
	route    lockhttp.Route                                    // the template, the combined lock options
	ctxValue func(r *http.Request, name string) (string, bool) // {ctx.name} from r.Context()
}

// New returns middleware that runs the next handler while holding the lock
// named by the key template (for example "order:{query.user_id}:{path.voucher}";
// typed placeholders such as {query.user_id:int} canonicalise the value; see
// package keyfunc for the syntax and keyfunc.HTTP for bare names).
//
// Answers: 400 for a key error (naming the part), 413 for a body over
// WithMaxBodySize, 429 with Retry-After when the lock is still busy after
// the wait (WithBusyHandler), 503 when Redis is unavailable (the handler
// does not run, unless WithFailOpen) or the lock fails otherwise (the
// Locker closed, an unsupported server: never fail-open), 503 when the
// request's deadline passes while waiting, 499 (StatusClientClosedRequest)
// when the request is cancelled while waiting. The lease is released after
// the handler, also when it panics; the release is bounded by
// WithReleaseTimeout.
//
// New checks everything at setup: the Locker, the template and every
// option (each option's own checks, then core.Combine of the lock options),
// so that a mistake is an error here rather than an answer to every
// request.
//
// Errors: ErrNoLocker for a nil Locker; a *keyfunc.Error (ErrBadTemplate)
// for an empty or malformed template or one naming a source HTTP cannot
// read; an error matching core.ErrInvalid and naming the option for a nil
// or invalid option (WithWait below zero other than core.NoWait, WithTTL
// below core.MinTTL, a negative WithReleaseTimeout or WithMaxBodySize, an
// invalid core option in WithLockOptions).
func New(l *core.Locker, key string, opts ...Option) (func(http.Handler) http.Handler, error) {
	if l == nil {
		return nil, ErrNoLocker
	}
	t, err := keyfunc.Compile(key, keyfunc.HTTP())
	if err != nil {
		return nil, err
	}
	return NewTemplate(l, t, opts...)
}

// NewTemplate is New for a template compiled beforehand or built with
// keyfunc.Join. It is re-validated for HTTP (keyfunc.HTTP): gRPC sources are
// an ErrBadTemplate error, and so is a nil template. Other errors as for
// New.
func NewTemplate(l *core.Locker, key *keyfunc.Template, opts ...Option) (func(http.Handler) http.Handler, error) {
	if l == nil {
		return nil, ErrNoLocker
	}
	m := &middleware{l: l, o: defaultOptions()}
	t, err := m.o.setup.ForHTTP("key template", key)
	if err != nil {
		return nil, err
	}
	for i, opt := range opts {
		if opt == nil {
			return nil, m.o.setup.Invalid("New", "option %d is nil", i)
		}
		opt(&m.o)
	}
	if m.route, err = m.o.setup.Route(t, "lock options"); err != nil {
		return nil, err
	}
	if m.o.logger == nil {
		m.o.logger = slog.Default()
	}
	value := m.o.contextValue
	m.ctxValue = func(r *http.Request, name string) (string, bool) { return value(r.Context(), name) }
	return m.wrap, nil
}

// Must returns mw and panics if err is not nil, for one-line route setup:
//
//	mux.Handle("POST /orders/{voucher}", httplock.Must(httplock.New(l, "order:{path.voucher}"))(h))
func Must(mw func(http.Handler) http.Handler, err error) func(http.Handler) http.Handler {
	if err != nil {
		panic(err)
	}
	return mw
}

// FromContext returns the lease held for the request whose context is ctx
// (the handler's r.Context(), or a context derived from it), or nil when no
// lock is held (the handler runs fail-open).
func FromContext(ctx context.Context) *core.Lease { return core.FromContext(ctx) }

func (m *middleware) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(next, w, r)
	})
}

func (m *middleware) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	q := lockhttp.Request[*http.Request]{R: r, C: r, MaxBody: m.o.setup.MaxBody(), Path: m.o.pathValue, Ctx: m.ctxValue}
	if m.route.Body {
		if status, err := q.ReadBody(); err != nil {
			m.o.onError(w, r, status, err)
			return
		}
	}
	key, err := m.route.Template.Key(q.Lookup)
	if err != nil {
		m.o.onError(w, r, http.StatusBadRequest, err)
		return
	}
	lease, err := m.l.Lock(r.Context(), key, m.route.LockOpts...)
	if err != nil {
		m.failed(next, w, r, err)
		return
	}
	defer m.release(lease, r)
	next.ServeHTTP(w, r.WithContext(lease.Context()))
}

func (m *middleware) failed(next http.Handler, w http.ResponseWriter, r *http.Request, err error) {
	ctx := r.Context()
	d := lockhttp.Decide(err, m.o.failOpen, ctx)
	d.Report(ctx, m.o.logger, m.route.Template.String(), err)
	switch d.Status {
	case 0:
		next.ServeHTTP(w, r)
	case http.StatusTooManyRequests:
		setRetryAfter(w, err)
		m.o.busy.ServeHTTP(w, r)
	default:
		m.o.onError(w, r, d.Status, err)
	}
}

// release unlocks after the handler, on return or panic (a deferred call:
// the panic goes on to the server as usual). Unlock is detached from the
// request's cancellation and bounded by the release timeout, so a request
// already over still releases its lock, and a lease known lost returns at
// once.
func (m *middleware) release(lease *core.Lease, r *http.Request) {
	lockhttp.Release(r.Context(), m.o.logger, lease)
}
