package fiberlock_test

import (
	"context"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/lockgate/lockgate/internal/httpsuite"
	"github.com/lockgate/lockgate/middleware/fiber"
)

// TestSuite runs the HTTP behaviour suite on Fiber v2, behind Fiber's
// recover middleware (a panic answers 500).
func TestSuite(t *testing.T) { httpsuite.Run(t, stack) }

var stack = httpsuite.Stack{
	Name:  "fiber",
	Serve: serveRoutes,
	// fasthttp does not cancel anything when the client goes away; the
	// user context is the one earlier middleware set (Background by
	// default).
	NoClientCancel: true,
}

// serveRoutes serves routes on one Fiber app (newApp: recover in front),
// each behind fiberlock configured from the route.
func serveRoutes(t testing.TB, routes []httpsuite.Route) string {
	t.Helper()
	f := newApp()
	for _, rt := range routes {
		var chain []fiber.Handler
		if rt.Context != nil {
			chain = append(chain, withContext(rt.Context))
		}
		if !rt.Bare {
			cfg := config(rt)
			if err := fiberlock.Validate(cfg); err != nil {
				t.Fatalf("fiberlock config for %q: %v", rt.Key, err)
			}
			chain = append(chain, fiberlock.New(cfg))
		}
		f.Add(rt.Method, httpsuite.ColonPath(rt.Path), append(chain, handler(rt.Handler))...)
	}
	return start(t, f).URL
}

// config maps the suite's route to a fiberlock.Config; zero values keep
// the defaults.
func config(rt httpsuite.Route) fiberlock.Config {
	o := rt.Options
	cfg := fiberlock.Config{
		Locker:         rt.Locker,
		Key:            rt.Key,
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
		cfg.LimitReached = func(c *fiber.Ctx) error {
			return c.Status(fiber.StatusTooManyRequests).SendString("custom busy")
		}
	}
	if o.CustomError {
		cfg.ErrorHandler = func(c *fiber.Ctx, status int, _ error) error {
			return c.Status(status).SendString("custom error")
		}
	}
	return cfg
}

// handler runs h as a Fiber handler: c.UserContext(), the lease, the body
// and the form as Fiber parses them.
func handler(h httpsuite.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		body := append([]byte(nil), c.Body()...)
		status, text := h(c.UserContext(), fiberlock.FromContext(c), httpsuite.Request{
			Body: body,
			Form: func(name string) string { return c.FormValue(name) },
		})
		return c.Status(status).SendString(text)
	}
}

// withContext is an earlier middleware that sets the user context.
func withContext(f func(parent context.Context) context.Context) fiber.Handler {
	return func(c *fiber.Ctx) error {
		c.SetUserContext(f(c.UserContext()))
		return c.Next()
	}
}
