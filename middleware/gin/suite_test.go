package ginlock_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/lockgate/lockgate/internal/httpsuite"
	"github.com/lockgate/lockgate/middleware/gin"
)

// TestSuite runs the shared HTTP behaviour suite against the Gin adapter.
func TestSuite(t *testing.T) { httpsuite.Run(t, stack) }

var stack = httpsuite.Stack{Name: "gin", Serve: serveSuite}

// serveSuite serves routes on a gin.New engine with gin.Recovery in front,
// each behind ginlock configured from the route's options (none for a Bare
// route), with Route.Context, when set, as the middleware in front of it.
func serveSuite(t testing.TB, routes []httpsuite.Route) string {
	t.Helper()
	e := newEngine()
	for _, rt := range routes {
		var chain []gin.HandlerFunc
		if rt.Context != nil { // an earlier middleware setting the request's context
			chain = append(chain, func(c *gin.Context) {
				c.Request = c.Request.WithContext(rt.Context(c.Request.Context()))
				c.Next()
			})
		}
		if !rt.Bare {
			mw, err := ginlock.New(rt.Locker, rt.Key, suiteOptions(rt.Options)...)
			if err != nil {
				t.Fatalf("ginlock.New(%q): %v", rt.Key, err)
			}
			chain = append(chain, mw)
		}
		chain = append(chain, suiteHandler(rt.Handler))
		e.Handle(rt.Method, httpsuite.ColonPath(rt.Path), chain...)
	}
	return serve(t, e).URL
}

// suiteHandler adapts a framework-neutral handler: the context a Gin
// handler is handed (c.Request.Context()), the lease, the body read in full
// (and replayed for c.PostForm).
func suiteHandler(h httpsuite.Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		body, err := io.ReadAll(c.Request.Body)
		if err != nil {
			c.String(http.StatusBadRequest, "read body: %v", err)
			return
		}
		c.Request.Body = io.NopCloser(bytes.NewReader(body))
		ctx := c.Request.Context()
		status, out := h(ctx, ginlock.FromContext(ctx), httpsuite.Request{Body: body, Form: c.PostForm})
		c.Data(status, "text/plain; charset=utf-8", []byte(out))
	}
}

func suiteOptions(o httpsuite.Options) []ginlock.Option {
	opts := []ginlock.Option{
		ginlock.WithWait(o.Wait),
		ginlock.WithTTL(o.TTL),
		ginlock.WithReleaseTimeout(o.ReleaseTimeout),
		ginlock.WithMaxBodySize(o.MaxBodySize),
		ginlock.WithLogger(o.Logger),
		ginlock.WithLockOptions(o.LockOptions...),
	}
	if o.FailOpen {
		opts = append(opts, ginlock.WithFailOpen())
	}
	if o.Limit != 0 {
		opts = append(opts, ginlock.WithLimit(o.Limit))
	}
	if o.Shared {
		opts = append(opts, ginlock.WithShared())
	}
	if o.CustomBusy {
		opts = append(opts, ginlock.WithBusyHandler(func(c *gin.Context) {
			c.String(http.StatusTooManyRequests, "custom busy")
		}))
	}
	if o.CustomError {
		opts = append(opts, ginlock.WithErrorHandler(func(c *gin.Context, status int, _ error) {
			c.String(status, "custom error")
		}))
	}
	return opts
}
