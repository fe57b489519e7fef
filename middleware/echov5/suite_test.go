package echolock_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/labstack/echo/v5"

	"github.com/lockgate/lockgate/internal/httpsuite"
	echolock "github.com/lockgate/lockgate/middleware/echov5"
)

// TestSuite runs the shared HTTP behaviour suite against the Echo v5
// adapter.
func TestSuite(t *testing.T) { httpsuite.Run(t, stack) }

var stack = httpsuite.Stack{Name: "echov5", Serve: serveSuite}

// serveSuite mounts every route on one Echo (with Recover in front), each
// behind the middleware configured from its Options, after the route's
// Context middleware when it has one; a Bare route has no lock middleware.
func serveSuite(t testing.TB, routes []httpsuite.Route) string {
	t.Helper()
	e := newEcho()
	for _, rt := range routes {
		var mws []echo.MiddlewareFunc
		if rt.Context != nil {
			set := rt.Context
			mws = append(mws, func(next echo.HandlerFunc) echo.HandlerFunc {
				return func(c *echo.Context) error {
					r := c.Request()
					c.SetRequest(r.WithContext(set(r.Context())))
					return next(c)
				}
			})
		}
		if !rt.Bare {
			mw, err := echolock.NewWithConfig(suiteConfig(rt))
			if err != nil {
				t.Fatalf("route %s %s: %v", rt.Method, rt.Path, err)
			}
			mws = append(mws, mw)
		}
		h := rt.Handler
		e.Add(rt.Method, httpsuite.ColonPath(rt.Path), func(c *echo.Context) error {
			r := c.Request()
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return err
			}
			// The handler reads the body in full and then its form values:
			// replay the body for c.FormValue.
			r.Body = io.NopCloser(bytes.NewReader(body))
			ctx := r.Context()
			status, out := h(ctx, echolock.FromContext(ctx), httpsuite.Request{Body: body, Form: c.FormValue})
			return c.String(status, out)
		}, mws...)
	}
	return start(t, e).URL
}

// suiteConfig is the middleware's Config for the route's Options.
func suiteConfig(rt httpsuite.Route) echolock.Config {
	o := rt.Options
	cfg := echolock.Config{
		Locker:         rt.Locker,
		Key:            rt.Key,
		Wait:           o.Wait,
		TTL:            o.TTL,
		ReleaseTimeout: o.ReleaseTimeout,
		MaxBodySize:    o.MaxBodySize,
		FailOpen:       o.FailOpen,
		Logger:         o.Logger,
		LockOptions:    o.LockOptions,
		Limit:          o.Limit,
		Shared:         o.Shared,
	}
	if o.CustomBusy {
		cfg.BusyHandler = func(c *echo.Context, _ error) error {
			return c.String(http.StatusTooManyRequests, "custom busy")
		}
	}
	if o.CustomError {
		cfg.ErrorHandler = func(c *echo.Context, status int, _ error) error {
			return c.String(status, "custom error")
		}
	}
	return cfg
}
