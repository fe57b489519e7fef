package httplock

import (
	"context"
	"fmt"
	"net/http"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/lockhttp"
	"github.com/lockgate/lockgate/keyfunc"
)

// ErrNoLocker is returned by New and NewTemplate for a nil Locker. It
// matches core.ErrInvalid.
var ErrNoLocker = fmt.Errorf("httplock: nil Locker: %w", core.ErrInvalid)

// New returns middleware that runs the next handler while holding the lock
// named by the key template (for example "order:{query.user_id}:{path.voucher}";
// typed placeholders such as {query.user_id:int} canonicalise the value; see
// package keyfunc for the syntax and keyfunc.HTTP for bare names).
//
// It answers as every adapter does (middleware/README.md in the
// repository, Answers); WithBusyHandler and WithErrorHandler replace the
// answers. The lease is released after the handler, also when it panics.
//
// New checks everything at setup, so that a mistake is an error here
// rather than an answer to every request: ErrNoLocker for a nil Locker; a
// *keyfunc.Error (ErrBadTemplate) for an empty or malformed template or
// one naming a source HTTP cannot read; an error matching core.ErrInvalid
// and naming the option for a nil or invalid option.
func New(l *core.Locker, key string, opts ...Option) (func(http.Handler) http.Handler, error) {
	return lockhttp.NewFromKey(l, key, opts, ErrNoLocker, NewTemplate)
}

// NewTemplate is New for a template compiled beforehand or built with
// keyfunc.Join. It is re-validated for HTTP (keyfunc.HTTP): gRPC sources are
// an ErrBadTemplate error, and so is a nil template. Other errors as for
// New.
func NewTemplate(l *core.Locker, key *keyfunc.Template, opts ...Option) (func(http.Handler) http.Handler, error) {
	m := &middleware{o: defaultOptions()}
	var err error
	if m.e, err = lockhttp.OptionsEngine[call, struct{}](&m.o, l, key, opts, ErrNoLocker, m); err != nil {
		return nil, err
	}
	return m.wrap, nil
}

// Must returns mw and panics if err is not nil, for one-line route setup:
//
//	mux.Handle("POST /orders/{voucher}", httplock.Must(httplock.New(l, "order:{path.voucher}"))(h))
func Must(mw func(http.Handler) http.Handler, err error) func(http.Handler) http.Handler {
	return lockhttp.Must(mw, err)
}

// FromContext returns the lease held for the request whose context is ctx
// (the handler's r.Context(), or a context derived from it), or nil when no
// lock is held (the handler runs fail-open).
func FromContext(ctx context.Context) *core.Lease { return core.FromContext(ctx) }

// middleware is the shim of the shared engine (lockhttp.Engine) for
// net/http.
type middleware struct {
	o options
	e lockhttp.Engine[call, struct{}]
}

// call is one request through the middleware.
type call struct {
	w    http.ResponseWriter
	r    *http.Request
	next http.Handler
}

func (m *middleware) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.e.Serve(call{w, r, next})
	})
}

func (m *middleware) Skip(call) bool { return false }

// Route is the pattern http.ServeMux (or chi) matched.
func (m *middleware) Route(c call) string { return c.r.Pattern }

func (m *middleware) Key(c call, route *lockhttp.Route) (string, int, error) {
	q := lockhttp.Request[*http.Request]{R: c.r, C: c.r, MaxBody: m.o.Setup.MaxBody(), Path: m.o.Path, Ctx: m.o.Ctx}
	return q.Key(route)
}

func (m *middleware) Context(c call) context.Context { return c.r.Context() }

func (m *middleware) Next(c call) struct{} {
	c.next.ServeHTTP(c.w, c.r)
	return struct{}{}
}

func (m *middleware) Locked(c call, lease *core.Lease) struct{} {
	c.next.ServeHTTP(c.w, c.r.WithContext(lease.Context()))
	return struct{}{}
}

func (m *middleware) Busy(c call, retryAfter string, _ error) struct{} {
	c.w.Header().Set("Retry-After", retryAfter)
	m.o.Busy.ServeHTTP(c.w, c.r)
	return struct{}{}
}

func (m *middleware) Error(c call, status int, retryAfter string, err error) struct{} {
	if retryAfter != "" {
		c.w.Header().Set("Retry-After", retryAfter)
	}
	m.o.Error(c.w, c.r, status, err)
	return struct{}{}
}
