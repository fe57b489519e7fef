package fiberlock

import (
	"context"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/fiberkey"
	"github.com/lockgate/lockgate/internal/lockhttp"
	"github.com/lockgate/lockgate/keyfunc"
)

type leaseKey struct{}

// New creates a new middleware handler that runs the rest of the chain while
// holding the lock named by the key template (typed placeholders such as
// {query.user_id:int} canonicalise the value; see package keyfunc).
//
// Answers: 400 for a key error (naming the part), 413 for a body over
// MaxBodySize, LimitReached (429 with Retry-After) when still busy after
// the wait, 503 when Redis is unavailable (the handler does not run unless
// FailOpen) or the lock fails otherwise (the Locker closed, an unsupported
// server: never fail-open), 503 when the user context's deadline passes
// while waiting, 499 (StatusClientClosedRequest) when it is cancelled. The
// lease is released after the handler, also when it returns an error or
// panics (the panic goes on to Fiber's recover middleware), within
// ReleaseTimeout.
//
// Like Fiber's own middleware, New panics on a bad config, at setup, with
// the error Validate returns: no Locker, no Key nor Template, a malformed
// template or one naming a source HTTP cannot read (a *keyfunc.Error with
// ErrBadTemplate), or an invalid Wait, TTL, ReleaseTimeout, MaxBodySize or
// LockOptions entry (an error matching core.ErrInvalid and naming the
// field). Only the first config is used.
func New(config ...Config) fiber.Handler {
	var cfg Config
	if len(config) > 0 {
		cfg = config[0]
	}
	m, err := build(cfg)
	if err != nil {
		panic(err)
	}
	return m.handle
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

type middleware struct {
	cfg   Config
	route lockhttp.Route // the template, the combined lock options
}

// build checks cfg and compiles it.
func build(cfg Config) (*middleware, error) {
	cfg = configDefault(cfg)
	s := lockhttp.NewSetup("fiberlock")
	if cfg.Locker == nil {
		return nil, s.Invalid("Config.Locker", "required")
	}
	route, err := s.ConfigRoute(lockhttp.Fields{Key: cfg.Key, Template: cfg.Template, Wait: cfg.Wait, TTL: cfg.TTL,
		ReleaseTimeout: cfg.ReleaseTimeout, LockOptions: cfg.LockOptions, MaxBodySize: int64(cfg.MaxBodySize)})
	if err != nil {
		return nil, err
	}
	return &middleware{cfg: cfg, route: route}, nil
}

func (m *middleware) handle(c *fiber.Ctx) error {
	cfg := &m.cfg
	if cfg.Next != nil && cfg.Next(c) {
		return c.Next()
	}
	if m.route.Body && len(c.Body()) > cfg.MaxBodySize {
		err := &keyfunc.Error{Part: "body", Err: keyfunc.ErrBodyTooLarge}
		return cfg.ErrorHandler(c, fiber.StatusRequestEntityTooLarge, err)
	}
	q := fiberkey.Request[*fiber.Ctx]{C: c, Unescaped: unescaped, Ctx: cfg.ContextValue}
	key, err := m.route.Template.Key(q.Lookup)
	if err != nil {
		return cfg.ErrorHandler(c, fiber.StatusBadRequest, err)
	}
	parent := c.UserContext()
	lease, err := cfg.Locker.Lock(parent, key, m.route.LockOpts...)
	if err != nil {
		return m.failed(c, parent, err)
	}
	c.Locals(leaseKey{}, lease)
	c.SetUserContext(lease.Context())
	defer func() {
		// Runs on return and while a panic unwinds (the panic goes on).
		// Unlock is detached from parent's cancellation and bounded by the
		// release timeout; a lease known lost returns at once.
		c.SetUserContext(parent)
		c.Locals(leaseKey{}, nil)
		lockhttp.Release(parent, cfg.Logger, lease)
	}()
	return c.Next()
}

func (m *middleware) failed(c *fiber.Ctx, ctx context.Context, err error) error {
	cfg := &m.cfg
	d := lockhttp.Decide(err, cfg.FailOpen, ctx)
	d.Report(ctx, cfg.Logger, m.route.Template.String(), err)
	switch d.Status {
	case 0:
		return c.Next()
	case fiber.StatusTooManyRequests:
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(core.RetryAfterSeconds(err)))
		return cfg.LimitReached(c)
	}
	return cfg.ErrorHandler(c, d.Status, err)
}

// unescaped reports whether c's app decodes path parameters itself.
func unescaped(c *fiber.Ctx) bool { return c.App().Config().UnescapePath }
