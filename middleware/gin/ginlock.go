package ginlock

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/lockhttp"
	"github.com/lockgate/lockgate/keyfunc"
)

// ErrNoLocker is returned by New and NewTemplate for a nil Locker. It
// matches core.ErrInvalid.
var ErrNoLocker = fmt.Errorf("ginlock: nil Locker: %w", core.ErrInvalid)

type middleware struct {
	l     *core.Locker
	o     options
	route lockhttp.Route // the template, the combined lock options
}

// New returns Gin middleware that runs the rest of the chain (c.Next())
// while holding the lock named by the key template (for example
// "order:{query.user_id}:{path.voucher}"; {path.x} reads c.Param; typed
// placeholders such as {query.user_id:int} canonicalise the value; see
// package keyfunc for the syntax and keyfunc.HTTP for bare names).
//
// Answers (each one aborts the chain): 400 for a key error (naming the
// part), 413 for a body over WithMaxBodySize, 429 with Retry-After when the
// lock is still busy after the wait (WithBusyHandler), 503 when Redis is
// unavailable (the handler does not run, unless WithFailOpen) or the lock
// fails otherwise (the Locker closed, an unsupported server: never
// fail-open), 503 when the request's deadline passes while waiting, 499
// (StatusClientClosedRequest) when the request is cancelled while waiting.
// The lease is released after c.Next() returns, also when a handler
// panics (the panic goes on to gin.Recovery); the release is bounded by
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
func New(l *core.Locker, key string, opts ...Option) (gin.HandlerFunc, error) {
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
func NewTemplate(l *core.Locker, key *keyfunc.Template, opts ...Option) (gin.HandlerFunc, error) {
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
	return m.handle, nil
}

// Must returns h and panics if err is not nil, for one-line route setup:
//
//	r.POST("/orders/:voucher", ginlock.Must(ginlock.New(l, "order:{path.voucher}")), handler)
func Must(h gin.HandlerFunc, err error) gin.HandlerFunc {
	if err != nil {
		panic(err)
	}
	return h
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

func (m *middleware) handle(c *gin.Context) {
	if m.o.skip != nil && m.o.skip(c) {
		c.Next()
		return
	}
	r := c.Request
	q := lockhttp.Request[*gin.Context]{R: r, C: c, MaxBody: m.o.setup.MaxBody(), Path: (*gin.Context).Param, Ctx: m.o.contextValue}
	if m.route.Body {
		if status, err := q.ReadBody(); err != nil {
			m.answerError(c, status, err)
			return
		}
	}
	key, err := m.route.Template.Key(q.Lookup)
	if err != nil {
		m.answerError(c, http.StatusBadRequest, err)
		return
	}
	parent := r.Context()
	lease, err := m.l.Lock(parent, key, m.route.LockOpts...)
	if err != nil {
		m.failed(c, parent, err)
		return
	}
	c.Request = r.WithContext(lease.Context())
	defer func() {
		// Runs on return and while a panic unwinds (the panic goes on to
		// gin.Recovery). The middleware in front sees its own request
		// again. Unlock is detached from parent's cancellation and bounded
		// by the release timeout, so a request already over still
		// releases; a lease known lost returns at once.
		c.Request = r
		lockhttp.Release(parent, m.o.logger, lease)
	}()
	c.Next()
}

func (m *middleware) failed(c *gin.Context, ctx context.Context, err error) {
	d := lockhttp.Decide(err, m.o.failOpen, ctx)
	d.Report(ctx, m.o.logger, m.route.Template.String(), err)
	switch d.Status {
	case 0:
		c.Next()
	case http.StatusTooManyRequests:
		setRetryAfter(c, err)
		// Abort first: a replacement that only writes (or calls c.Next)
		// must not let the handler run without the lock.
		c.Abort()
		m.o.busy(c)
	default:
		m.answerError(c, d.Status, err)
	}
}

// answerError aborts the chain and runs the error handler.
func (m *middleware) answerError(c *gin.Context, status int, err error) {
	c.Abort()
	m.o.onError(c, status, err)
}
