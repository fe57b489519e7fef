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
	t        *keyfunc.Template
	o        options
	lockOpts []core.LockOption // the route's options combined: none or one
	body     bool              // the key reads the body
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
	if key == nil {
		return nil, fmt.Errorf("httplock: nil key template: %w", keyfunc.ErrBadTemplate)
	}
	t, err := key.For(keyfunc.HTTP())
	if err != nil {
		return nil, err
	}
	m := &middleware{l: l, t: t, o: defaultOptions()}
	for i, opt := range opts {
		if opt == nil {
			return nil, invalid("New", "option %d is nil", i)
		}
		opt(&m.o)
	}
	if m.o.err != nil {
		return nil, m.o.err
	}
	// Observations name the route's lock by its template (WithLockOptions
	// may name it otherwise), never by the key.
	combined, err := core.Combine(append([]core.LockOption{core.WithPattern(t.String())}, m.o.lockOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("httplock: lock options: %w", err)
	}
	m.lockOpts = []core.LockOption{combined}
	if m.o.logger == nil {
		m.o.logger = slog.Default()
	}
	m.body = t.Uses(keyfunc.SourceBody) || t.Uses(keyfunc.SourceForm)
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
	q := lockhttp.Request{R: r, MaxBody: m.o.maxBody,
		Path: func(name string) string { return m.o.pathValue(r, name) },
		Ctx:  func(name string) (string, bool) { return m.o.contextValue(r.Context(), name) }}
	if m.body {
		if status, err := q.ReadBody(); err != nil {
			m.o.onError(w, r, status, err)
			return
		}
	}
	key, err := m.t.Key(q.Lookup)
	if err != nil {
		m.o.onError(w, r, http.StatusBadRequest, err)
		return
	}
	lease, err := m.l.Lock(r.Context(), key, m.lockOpts...)
	if err != nil {
		m.failed(next, w, r, key, err)
		return
	}
	defer m.release(lease, r)
	next.ServeHTTP(w, r.WithContext(lease.Context()))
}

func (m *middleware) failed(next http.Handler, w http.ResponseWriter, r *http.Request, key string, err error) {
	ctx := r.Context()
	d := lockhttp.Decide(err, m.o.failOpen, ctx)
	d.Report(ctx, m.o.logger, m.t.String(), err)
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
