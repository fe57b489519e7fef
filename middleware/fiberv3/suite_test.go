package fiberlock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v3"

	"github.com/lockgate/lockgate/internal/httpsuite"
	fiberlock "github.com/lockgate/lockgate/middleware/fiberv3"
)

// TestSuite runs the shared behaviour suite of the HTTP adapters against
// this one.
func TestSuite(t *testing.T) { httpsuite.Run(t, stack) }

var stack = httpsuite.Stack{
	Name:  "fiberv3",
	Serve: serveSuite,
	// fasthttp does not cancel the request's context when the client goes
	// away.
	NoClientCancel: true,
}

// handlerCtx is the ctx the suite's handlers get: c.Context(), the
// request context that Fiber v3 handlers pass on (Fiber's own timeout
// middleware cancels it, not c) and that the middleware sets to the
// lease's Context. Not the fiber.Ctx itself: with Fiber's default Ctx its
// Done and Err never fire and its Value reads c.Locals only, so a lost or
// released lock cannot cancel it and a Lock with it does not re-enter
// (LeaseInHandler, LockLost, ReleaseAfterCancel and NoOwnerFromRequest
// fail with it; see doc.go). The lease is read with FromContext(c), the
// fiber.Ctx itself; TestLeaseInHandler checks FromContext(c.Context()).
func handlerCtx(c fiber.Ctx) context.Context { return c.Context() }

// serveSuite serves routes on one Fiber app, each behind the middleware
// configured from its Options (Bare: without it), with Route.Context as an
// earlier middleware and the recover middleware in front.
func serveSuite(t testing.TB, routes []httpsuite.Route) string {
	t.Helper()
	f := newApp()
	for _, r := range routes {
		var chain []any
		if r.Context != nil {
			mk := r.Context
			chain = append(chain, func(c fiber.Ctx) error {
				c.SetContext(mk(c.Context()))
				return c.Next()
			})
		}
		if !r.Bare {
			cfg := suiteConfig(r)
			if err := fiberlock.Validate(cfg); err != nil {
				t.Fatalf("route %s %s: %v", r.Method, r.Path, err)
			}
			chain = append(chain, fiberlock.New(cfg))
		}
		h := r.Handler
		chain = append(chain, func(c fiber.Ctx) error {
			req := httpsuite.Request{
				Body: append([]byte(nil), c.Body()...),
				Form: func(name string) string { return strings.Clone(c.FormValue(name)) },
			}
			status, body := h(handlerCtx(c), fiberlock.FromContext(c), req)
			return c.Status(status).SendString(body)
		})
		f.Add([]string{r.Method}, httpsuite.ColonPath(r.Path), chain[0], chain[1:]...)
	}
	return start(t, f).URL
}

func suiteConfig(r httpsuite.Route) fiberlock.Config {
	o := r.Options
	cfg := fiberlock.Config{
		Locker:         r.Locker,
		Key:            r.Key,
		Wait:           o.Wait,
		TTL:            o.TTL,
		ReleaseTimeout: o.ReleaseTimeout,
		MaxBodySize:    int(o.MaxBodySize),
		FailOpen:       o.FailOpen,
		Logger:         o.Logger,
		LockOptions:    o.LockOptions,
		Limit:          o.Limit,
		Shared:         o.Shared,
	}
	if o.CustomBusy {
		cfg.LimitReached = func(c fiber.Ctx) error {
			return c.Status(fiber.StatusTooManyRequests).SendString("custom busy")
		}
	}
	if o.CustomError {
		cfg.ErrorHandler = func(c fiber.Ctx, status int, _ error) error {
			return c.Status(status).SendString("custom error")
		}
	}
	return cfg
}
