package fiberlock

import (
	"context"

	"github.com/gofiber/fiber/v3"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/fiberkey"
	"github.com/lockgate/lockgate/internal/lockhttp"
)

type leaseKey struct{}

// New creates a new middleware handler that runs the rest of the chain while
// holding the lock named by the key template (typed placeholders such as
// {query.user_id:int} canonicalise the value; see package keyfunc).
//
// It answers as every adapter does (middleware/README.md in the
// repository, Answers); Config.LimitReached and Config.ErrorHandler
// replace the answers. While the rest of the chain runs, c.Context() is
// the lease's Context and FromContext(c) the lease. The lease is released
// after the handler, also when it returns an error or panics (the panic
// goes on to Fiber's recover middleware).
//
// Like Fiber's own middleware, New panics on a bad config, at setup, with
// the error Validate returns: no Locker, no Key nor Template, a malformed
// template or one naming a source HTTP cannot read (a *keyfunc.Error with
// ErrBadTemplate), or an invalid Wait, TTL, ReleaseTimeout, MaxBodySize or
// LockOptions entry, a negative Limit or Shared with a Limit (an error
// matching core.ErrInvalid and naming the field). Only the first config is used.
func New(config ...Config) fiber.Handler {
	return lockhttp.Must(build(lockhttp.First(config))).handle
}

// Validate returns the error New(cfg) panics with, or nil when New(cfg)
// succeeds; for configurations built at run time (from files, flags, an fx
// graph), so that a mistake can be reported as an error.
func Validate(cfg Config) error {
	_, err := build(cfg)
	return err
}

// FromContext returns the lease held for the request by the middleware
// (Key, Fence, Context), or nil outside the handler or when no lock is held
// (fail-open, skipped by Next). ctx is either the handler's fiber.Ctx
// itself (the lease is kept in its Locals) or c.Context() or a context
// derived from it, for which it is core.FromContext(ctx): in the handler
// c.Context() is the lease's Context, so both give the same lease.
func FromContext(ctx context.Context) *core.Lease {
	switch c := ctx.(type) {
	case nil:
		return nil
	case fiber.Ctx:
		s, _ := c.Locals(leaseKey{}).(*core.Lease)
		return s
	}
	return core.FromContext(ctx)
}

// middleware is the shim of the shared engine (lockhttp.Engine) for
// Fiber v3: fiberkey.Shim and what differs from the other Fiber's.
type middleware struct {
	fiberkey.Shim[fiber.Ctx]
	e lockhttp.Engine[fiber.Ctx, error]
}

// build checks cfg and compiles it.
func build(cfg Config) (*middleware, error) {
	m := new(middleware)
	var err error
	if m.e, err = m.Setup(fiberkey.Config[fiber.Ctx](cfg), fiberkey.Config[fiber.Ctx](ConfigDefault), unescaped, m); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *middleware) handle(c fiber.Ctx) error { return m.e.Serve(c) }

// Route is the pattern Fiber matched ("/v/:voucher").
func (m *middleware) Route(c fiber.Ctx) string { return c.Route().Path }

func (m *middleware) Context(c fiber.Ctx) context.Context { return c.Context() }

func (m *middleware) Locked(c fiber.Ctx, lease *core.Lease) error {
	parent := c.Context()
	prev := c.Locals(leaseKey{}) // an enclosing fiberlock's, or nil
	c.Locals(leaseKey{}, lease)
	c.SetContext(lease.Context())
	// On return and while a panic unwinds (the panic goes on), before the
	// release.
	defer func() {
		if !abandoned(c) {
			c.SetContext(parent)
			c.Locals(leaseKey{}, prev)
		}
		// else Fiber's timeout middleware gave up on the request at its
		// timeout (c.Abandon) and another goroutine still owns c, which is
		// never reused: c is left alone. Behind this middleware (around
		// the handler) the handler may still be running; its context is
		// over (the timeout's deadline, then the lease's cancellation, as
		// for a lost lock). In front of it, the handler has returned.
	}()
	return c.Next()
}

// abandoned reports whether c was abandoned (fiber.CustomCtx.Abandon, as
// the timeout middleware does at its timeout): its handler goes on in
// another goroutine.
func abandoned(c fiber.Ctx) bool {
	a, ok := c.(interface{ IsAbandoned() bool })
	return ok && a.IsAbandoned()
}

// unescaped reports whether c's app decodes path parameters itself.
func unescaped(c fiber.Ctx) bool { return c.App().Config().UnescapePath }
