package fiberlock

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// unlockTimeout bounds the release after the handler.
const unlockTimeout = 5 * time.Second

type leaseKey struct{}

// New creates a new middleware handler that runs the rest of the chain while
// holding the lock named by the key template. Outcomes: 400 for a key error
// (naming the part), 413 for a body over MaxBodySize, LimitReached (429
// with Retry-After) when still busy after the wait, 503 when locking fails
// otherwise (the handler does not run unless FailOpen). The lease is
// released after the handler, also when it returns an error or panics (the
// panic goes on to Fiber's recover middleware).
//
// Like Fiber's own middleware, New panics on a bad config, at setup: no
// Locker, no Key nor Template, or a malformed template or one naming a
// source HTTP cannot read (a *keyfunc.Error with ErrBadTemplate).
func New(config ...Config) fiber.Handler {
	cfg := configDefault(config...)
	if cfg.Locker == nil {
		panic("fiberlock: Config.Locker is required")
	}
	tmpl := cfg.Template
	if tmpl == nil {
		if cfg.Key == "" {
			panic("fiberlock: Config.Key or Config.Template is required")
		}
		t, err := keyfunc.Compile(cfg.Key, keyfunc.HTTP())
		if err != nil {
			panic(err)
		}
		tmpl = t
	}
	tmpl, err := tmpl.For(keyfunc.HTTP())
	if err != nil {
		panic(err)
	}
	var lockOpts []core.Option
	switch {
	case cfg.Wait < 0:
		lockOpts = append(lockOpts, core.WithWait(0))
	case cfg.Wait > 0:
		lockOpts = append(lockOpts, core.WithWait(cfg.Wait))
	}
	if cfg.TTL > 0 {
		lockOpts = append(lockOpts, core.WithTTL(cfg.TTL))
	}
	lockOpts = append(lockOpts, cfg.LockOptions...)
	needBody := tmpl.Uses(keyfunc.SourceBody) || tmpl.Uses(keyfunc.SourceForm)

	return func(c *fiber.Ctx) error {
		if cfg.Next != nil && cfg.Next(c) {
			return c.Next()
		}
		if needBody && len(c.Body()) > cfg.MaxBodySize {
			err := &keyfunc.Error{Part: "body", Err: keyfunc.ErrBodyTooLarge}
			return cfg.ErrorHandler(c, fiber.StatusRequestEntityTooLarge, err)
		}
		q := request{cfg: &cfg, c: c}
		key, err := tmpl.Key(q.lookup)
		if err != nil {
			return cfg.ErrorHandler(c, fiber.StatusBadRequest, err)
		}
		parent := c.UserContext()
		lease, err := cfg.Locker.Lock(parent, key, lockOpts...)
		if err != nil {
			if errors.Is(err, core.ErrNotObtained) {
				c.Set(fiber.HeaderRetryAfter, strconv.Itoa(core.RetryAfterSeconds(err)))
				return cfg.LimitReached(c)
			}
			if cfg.FailOpen {
				cfg.Logger.WarnContext(parent, "lockgate: lock failed; running the handler without the lock (fail-open)",
					slog.String("key", key), slog.Any("error", err))
				return c.Next()
			}
			cfg.Logger.ErrorContext(parent, "lockgate: lock failed; answering 503",
				slog.String("key", key), slog.Any("error", err))
			return cfg.ErrorHandler(c, fiber.StatusServiceUnavailable, err)
		}
		c.Locals(leaseKey{}, lease)
		c.SetUserContext(lease.Context())
		defer func() {
			// Runs on return and while a panic unwinds (the panic goes on).
			c.SetUserContext(parent)
			c.Locals(leaseKey{}, nil)
			ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), unlockTimeout)
			defer cancel()
			if err := lease.Unlock(ctx); err != nil {
				cfg.Logger.WarnContext(ctx, "lockgate: release failed (the lock expires after its TTL)",
					slog.String("key", lease.Key()), slog.Any("error", err))
			}
		}()
		return c.Next()
	}
}

// Lease returns the lease held for the request by the middleware (Key,
// Fence, Context), or nil outside the handler or when no lock is held
// (fail-open, skipped by Next). c.UserContext() is the lease's Context while
// the handler runs.
func Lease(c *fiber.Ctx) *core.Lease {
	s, _ := c.Locals(leaseKey{}).(*core.Lease)
	return s
}
