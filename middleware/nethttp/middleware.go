package httplock

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// unlockTimeout bounds the release after the handler.
const unlockTimeout = 5 * time.Second

// ErrNoLocker is returned by New and NewTemplate for a nil Locker or
// template.
var ErrNoLocker = errors.New("httplock: nil Locker or key template")

type middleware struct {
	l    *core.Locker
	t    *keyfunc.Template
	o    options
	body bool // the key reads the body
}

// New returns middleware that runs the next handler while holding the lock
// named by the key template (for example "order:{query.user_id}:{path.voucher}";
// see package keyfunc for the syntax and keyfunc.HTTPBareOrder for bare
// names). The answers are: 400 for a key error, 413 for a body over
// WithMaxBodySize, 429 with Retry-After when the lock is still busy after
// the wait, 503 when the lock fails otherwise (the handler does not run,
// unless WithFailOpen). The lease is released after the handler, also when
// it panics.
//
// Errors: a *keyfunc.Error (ErrBadTemplate) for a malformed template or one
// naming a source HTTP cannot read; ErrNoLocker for a nil Locker.
func New(l *core.Locker, key string, opts ...Option) (func(http.Handler) http.Handler, error) {
	t, err := keyfunc.Compile(key, keyfunc.HTTP())
	if err != nil {
		return nil, err
	}
	return NewTemplate(l, t, opts...)
}

// NewTemplate is New for a template compiled beforehand or built with
// keyfunc.Join. It is re-validated for HTTP (keyfunc.HTTP): gRPC sources are
// an ErrBadTemplate error.
func NewTemplate(l *core.Locker, key *keyfunc.Template, opts ...Option) (func(http.Handler) http.Handler, error) {
	if l == nil || key == nil {
		return nil, ErrNoLocker
	}
	t, err := key.For(keyfunc.HTTP())
	if err != nil {
		return nil, err
	}
	m := &middleware{l: l, t: t, o: defaultOptions()}
	for _, opt := range opts {
		opt(&m.o)
	}
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
// (the handler's r.Context()), or nil when no lock is held (fail-open).
func FromContext(ctx context.Context) *core.Lease { return core.FromContext(ctx) }

func (m *middleware) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(next, w, r)
	})
}

func (m *middleware) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	q := request{m: m, r: r}
	if m.body && r.Body != nil && r.Body != http.NoBody {
		data, err := keyfunc.ReadBody(r.Body, m.o.maxBody)
		if err != nil {
			if errors.Is(err, keyfunc.ErrBodyTooLarge) {
				m.o.onError(w, r, http.StatusRequestEntityTooLarge, err)
			} else {
				m.o.onError(w, r, http.StatusBadRequest, err)
			}
			return
		}
		q.data = data
		r.Body = restoredBody{Reader: bytes.NewReader(data), orig: r.Body}
	}
	key, err := m.t.Key(q.lookup)
	if err != nil {
		m.o.onError(w, r, http.StatusBadRequest, err)
		return
	}
	lease, err := m.l.Lock(r.Context(), key, m.o.lockOpts...)
	if err != nil {
		m.failed(next, w, r, key, err)
		return
	}
	defer m.release(lease, r)
	next.ServeHTTP(w, r.WithContext(lease.Context()))
}

func (m *middleware) failed(next http.Handler, w http.ResponseWriter, r *http.Request, key string, err error) {
	if errors.Is(err, core.ErrNotObtained) {
		setRetryAfter(w, err)
		m.o.busy.ServeHTTP(w, r)
		return
	}
	if m.o.failOpen {
		m.o.logger.WarnContext(r.Context(), "lockgate: lock failed; running the handler without the lock (fail-open)",
			slog.String("key", key), slog.Any("error", err))
		next.ServeHTTP(w, r)
		return
	}
	m.o.logger.ErrorContext(r.Context(), "lockgate: lock failed; answering 503",
		slog.String("key", key), slog.Any("error", err))
	m.o.onError(w, r, http.StatusServiceUnavailable, err)
}

// release unlocks after the handler, on return or panic (a deferred call:
// the panic goes on to the server as usual).
func (m *middleware) release(lease *core.Lease, r *http.Request) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), unlockTimeout)
	defer cancel()
	if err := lease.Unlock(ctx); err != nil {
		m.o.logger.WarnContext(ctx, "lockgate: release failed (the lock expires after its TTL)",
			slog.String("key", lease.Key()), slog.Any("error", err))
	}
}
