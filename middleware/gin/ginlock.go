package ginlock

import (
	"context"
	"fmt"

	"github.com/gin-gonic/gin"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/lockhttp"
	"github.com/lockgate/lockgate/keyfunc"
)

// ErrNoLocker is returned by New and NewTemplate for a nil Locker. It
// matches core.ErrInvalid.
var ErrNoLocker = fmt.Errorf("ginlock: nil Locker: %w", core.ErrInvalid)

// New returns Gin middleware that runs the rest of the chain (c.Next())
// while holding the lock named by the key template (for example
// "order:{query.user_id}:{path.voucher}"; {path.x} reads c.Param; typed
// placeholders such as {query.user_id:int} canonicalise the value; see
// package keyfunc for the syntax and keyfunc.HTTP for bare names).
//
// It answers as every adapter does (middleware/README.md in the
// repository, Answers), each answer aborting the chain; WithBusyHandler
// and WithErrorHandler replace them. The lease is released after c.Next()
// returns, also when a handler panics (the panic goes on to gin.Recovery).
//
// New checks everything at setup, so that a mistake is an error here
// rather than an answer to every request: ErrNoLocker for a nil Locker; a
// *keyfunc.Error (ErrBadTemplate) for an empty or malformed template or
// one naming a source HTTP cannot read; an error matching core.ErrInvalid
// and naming the option for a nil or invalid option.
func New(l *core.Locker, key string, opts ...Option) (gin.HandlerFunc, error) {
	return lockhttp.NewFromKey(l, key, opts, ErrNoLocker, NewTemplate)
}

// NewTemplate is New for a template compiled beforehand or built with
// keyfunc.Join. It is re-validated for HTTP (keyfunc.HTTP): gRPC sources are
// an ErrBadTemplate error, and so is a nil template. Other errors as for
// New.
func NewTemplate(l *core.Locker, key *keyfunc.Template, opts ...Option) (gin.HandlerFunc, error) {
	m := &middleware{o: defaultOptions()}
	var err error
	if m.e, err = lockhttp.OptionsEngine[*gin.Context, struct{}](&m.o, l, key, opts, ErrNoLocker, m); err != nil {
		return nil, err
	}
	return m.handle, nil
}

// Must returns h and panics if err is not nil, for one-line route setup:
//
//	r.POST("/orders/:voucher", ginlock.Must(ginlock.New(l, "order:{path.voucher}")), handler)
func Must(h gin.HandlerFunc, err error) gin.HandlerFunc {
	return lockhttp.Must(h, err)
}

// FromContext returns the lease held for the request whose context is ctx,
// or nil when no lock is held (the handler runs fail-open, or was skipped).
// Pass c.Request.Context() (or a context derived from it): that always
// works. The *gin.Context c itself carries the lease only when the engine
// has ContextWithFallback set; without it FromContext(c) is nil (see the
// package doc). FromGin(c) needs no such care.
func FromContext(ctx context.Context) *core.Lease { return core.FromContext(ctx) }

// FromGin returns the lease held for the request of c (read from
// c.Request.Context(), whatever ContextWithFallback says), or nil when no
// lock is held.
func FromGin(c *gin.Context) *core.Lease {
	if c == nil || c.Request == nil {
		return nil
	}
	return core.FromContext(c.Request.Context())
}

// middleware is the shim of the shared engine (lockhttp.Engine) for Gin.
type middleware struct {
	o options
	e lockhttp.Engine[*gin.Context, struct{}]
}

func (m *middleware) handle(c *gin.Context) { m.e.Serve(c) }

func (m *middleware) Skip(c *gin.Context) bool { return m.o.Skip != nil && m.o.Skip(c) }

// Route is the pattern Gin matched ("/v/:voucher").
func (m *middleware) Route(c *gin.Context) string { return c.FullPath() }

func (m *middleware) Key(c *gin.Context, route *lockhttp.Route) (string, int, error) {
	q := lockhttp.Request[*gin.Context]{R: c.Request, C: c, MaxBody: m.o.Setup.MaxBody(), Path: m.o.Path, Ctx: m.o.Ctx}
	return q.Key(route)
}

func (m *middleware) Context(c *gin.Context) context.Context { return c.Request.Context() }

func (m *middleware) Next(c *gin.Context) struct{} {
	c.Next()
	return struct{}{}
}

func (m *middleware) Locked(c *gin.Context, lease *core.Lease) struct{} {
	r := c.Request
	c.Request = r.WithContext(lease.Context())
	// On return and while a panic unwinds (the panic goes on to
	// gin.Recovery), before the release: the middleware in front sees its
	// own request again.
	defer func() { c.Request = r }()
	c.Next()
	return struct{}{}
}

func (m *middleware) Busy(c *gin.Context, retryAfter string, _ error) struct{} {
	c.Header("Retry-After", retryAfter)
	// Abort first: a replacement that only writes (or calls c.Next) must
	// not let the handler run without the lock.
	c.Abort()
	m.o.Busy(c)
	return struct{}{}
}

// Error aborts the chain and runs the error handler.
func (m *middleware) Error(c *gin.Context, status int, retryAfter string, err error) struct{} {
	c.Abort()
	if retryAfter != "" {
		c.Header("Retry-After", retryAfter)
	}
	m.o.Error(c, status, err)
	return struct{}{}
}
