package fiberlock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/gofiber/fiber/v3"

	"github.com/lockgate/lockgate/core"
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
// server: never fail-open), 503 when the request context's (c.Context())
// deadline passes while waiting, 499 (StatusClientClosedRequest) when it
// is cancelled. While the rest of the chain runs, c.Context() is the
// lease's Context and FromContext(c) the lease. The lease is released
// after the handler, also when it returns an error or panics (the panic
// goes on to Fiber's recover middleware), within ReleaseTimeout.
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

type middleware struct {
	cfg      Config
	tmpl     *keyfunc.Template
	lockOpts []core.LockOption // the route's options combined: none or one
	needBody bool
}

// invalid is the error of an invalid Config field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("fiberlock: Config.%s: "+format+": %w", append(append([]any{field}, args...), core.ErrInvalid)...)
}

// build checks cfg and compiles it.
func build(cfg Config) (*middleware, error) {
	cfg = configDefault(cfg)
	if cfg.Locker == nil {
		return nil, invalid("Locker", "required")
	}
	tmpl := cfg.Template
	if tmpl == nil {
		if cfg.Key == "" {
			return nil, fmt.Errorf("fiberlock: Config.Key or Config.Template is required: %w", keyfunc.ErrBadTemplate)
		}
		t, err := keyfunc.Compile(cfg.Key, keyfunc.HTTP())
		if err != nil {
			return nil, err
		}
		tmpl = t
	}
	tmpl, err := tmpl.For(keyfunc.HTTP())
	if err != nil {
		return nil, err
	}
	// Observations name the route's lock by its template (LockOptions may
	// name it otherwise), never by the key.
	opts := []core.LockOption{core.WithPattern(tmpl.String())}
	add := func(field string, opt core.LockOption) error {
		if _, err := core.Combine(opt); err != nil {
			return fmt.Errorf("fiberlock: Config.%s: %w", field, err)
		}
		opts = append(opts, opt)
		return nil
	}
	switch {
	case cfg.Wait == 0:
	case cfg.Wait < 0 && cfg.Wait != core.NoWait:
		return nil, invalid("Wait", "wait %v is negative (use core.NoWait for a single attempt)", cfg.Wait)
	default:
		if err := add("Wait", core.WithWait(cfg.Wait)); err != nil {
			return nil, err
		}
	}
	if cfg.TTL != 0 {
		if err := add("TTL", core.WithTTL(cfg.TTL)); err != nil {
			return nil, err
		}
	}
	switch {
	case cfg.ReleaseTimeout < 0:
		return nil, invalid("ReleaseTimeout", "release timeout %v is negative", cfg.ReleaseTimeout)
	case cfg.ReleaseTimeout > 0:
		if err := add("ReleaseTimeout", core.WithReleaseTimeout(cfg.ReleaseTimeout)); err != nil {
			return nil, err
		}
	}
	for i, opt := range cfg.LockOptions {
		if opt == nil {
			return nil, invalid("LockOptions", "option %d is nil", i)
		}
		if err := add("LockOptions", opt); err != nil {
			return nil, err
		}
	}
	if cfg.MaxBodySize < 0 {
		return nil, invalid("MaxBodySize", "%d is negative", cfg.MaxBodySize)
	}
	m := &middleware{
		cfg:      cfg,
		tmpl:     tmpl,
		needBody: tmpl.Uses(keyfunc.SourceBody) || tmpl.Uses(keyfunc.SourceForm),
	}
	if len(opts) > 0 {
		combined, err := core.Combine(opts...)
		if err != nil {
			return nil, fmt.Errorf("fiberlock: lock options: %w", err)
		}
		m.lockOpts = []core.LockOption{combined}
	}
	return m, nil
}

func (m *middleware) handle(c fiber.Ctx) error {
	cfg := &m.cfg
	if cfg.Next != nil && cfg.Next(c) {
		return c.Next()
	}
	if m.needBody && len(c.Body()) > cfg.MaxBodySize {
		err := &keyfunc.Error{Part: "body", Err: keyfunc.ErrBodyTooLarge}
		return cfg.ErrorHandler(c, fiber.StatusRequestEntityTooLarge, err)
	}
	q := request{cfg: cfg, c: c}
	key, err := m.tmpl.Key(q.lookup)
	if err != nil {
		return cfg.ErrorHandler(c, fiber.StatusBadRequest, err)
	}
	parent := c.Context()
	lease, err := cfg.Locker.Lock(parent, key, m.lockOpts...)
	if err != nil {
		return m.failed(c, parent, key, err)
	}
	prev := c.Locals(leaseKey{}) // an enclosing fiberlock's, or nil
	c.Locals(leaseKey{}, lease)
	c.SetContext(lease.Context())
	defer func() {
		// Runs on return and while a panic unwinds (the panic goes on).
		// Unlock is detached from parent's cancellation and bounded by the
		// release timeout; a lease known lost returns at once.
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
		lockhttp.Release(parent, cfg.Logger, lease)
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

func (m *middleware) failed(c fiber.Ctx, ctx context.Context, key string, err error) error {
	cfg := &m.cfg
	d := lockhttp.Decide(err, cfg.FailOpen, ctx)
	d.Report(ctx, cfg.Logger, m.tmpl.String(), err)
	switch d.Status {
	case 0:
		return c.Next()
	case fiber.StatusTooManyRequests:
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(core.RetryAfterSeconds(err)))
		return cfg.LimitReached(c)
	}
	return cfg.ErrorHandler(c, d.Status, err)
}
