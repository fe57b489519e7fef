package fiberlock

import (
	"context"

	"github.com/gofiber/fiber/v2"

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
// replace the answers. While the rest of the chain runs, c.UserContext()
// is the lease's Context and FromContext(c) the lease. The lease is
// released after the handler, also when it returns an error or panics
// (the panic goes on to Fiber's recover middleware).
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
// (fail-open, skipped by Next). c.UserContext() is the lease's Context
// while the handler runs.
func FromContext(c *fiber.Ctx) *core.Lease {
	s, _ := c.Locals(leaseKey{}).(*core.Lease)
	return s
}

// middleware is the shim of the shared engine (lockhttp.Engine) for
// Fiber v2: fiberkey.Shim and what differs from the other Fiber's.
type middleware struct {
	fiberkey.Shim[*fiber.Ctx]
	e lockhttp.Engine[*fiber.Ctx, error]
}

// build checks cfg and compiles it.
func build(cfg Config) (*middleware, error) {
	m := new(middleware)
	var err error
	if m.e, err = m.Setup(fiberkey.Config[*fiber.Ctx](cfg), fiberkey.Config[*fiber.Ctx](ConfigDefault), unescaped, m); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *middleware) handle(c *fiber.Ctx) error { return m.e.Serve(c) }

// Route is the pattern Fiber matched ("/v/:voucher").
func (m *middleware) Route(c *fiber.Ctx) string { return c.Route().Path }

func (m *middleware) Context(c *fiber.Ctx) context.Context { return c.UserContext() }

func (m *middleware) Locked(c *fiber.Ctx, lease *core.Lease) error {
	parent := c.UserContext()
	c.Locals(leaseKey{}, lease)
	c.SetUserContext(lease.Context())
	// On return and while a panic unwinds (the panic goes on), before the
	// release.
	defer func() {
		c.SetUserContext(parent)
		c.Locals(leaseKey{}, nil)
	}()
	return c.Next()
}

// unescaped reports whether c's app decodes path parameters itself.
func unescaped(c *fiber.Ctx) bool { return c.App().Config().UnescapePath }
