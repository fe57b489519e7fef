// Package httpsuite is the one behaviour suite every HTTP adapter runs
// (net/http, chi through it, Fiber v2 and v3, Gin, Echo): given a Stack —
// a way to serve routes locked by the adapter under test — Run checks on a
// real redis-server everything the adapters promise alike: bad input, busy
// with Retry-After, Redis down fail-closed and fail-open, a lost lock
// cancelling the handler, a panic releasing, one request at a time with a
// control that overlaps, different keys in parallel, typed placeholders,
// the lease in the handler's context, replaceable answers and the
// pattern naming the lock. Adapter-specific behaviour (setup errors,
// options of one framework, Skipper/Next) stays in each adapter's tests.
package httpsuite

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
)

// Stack is one HTTP adapter under test.
type Stack struct {
	// Name names the stack in test output ("nethttp", "gin", ...).
	Name string
	// Serve starts a server (on a free loopback port) that serves every
	// route, each behind the adapter's middleware configured from it,
	// with the framework's usual panic recovery in front (a panic answers
	// 500 or drops the connection); it returns the base URL
	// ("http://127.0.0.1:port") and stops the server at t's cleanup. A
	// route's middleware that cannot be built fails the test.
	Serve func(t testing.TB, routes []Route) string
}

// Route is one locked route.
type Route struct {
	// Method is the HTTP method ("POST", "GET").
	Method string
	// Path is the route's path with {name} marking a path parameter
	// ("/seckill/{voucher}"); the stack writes it in its router's syntax
	// (":voucher") and the adapter reads {path.voucher} from it.
	Path string
	// Locker is the Locker the route's middleware uses.
	Locker *core.Locker
	// Key is the keyfunc template of the route's lock.
	Key string
	// Options are the middleware's settings.
	Options Options
	// Handler is the route's handler.
	Handler Handler
}

// Options are the middleware settings the suite varies; zero values keep
// the adapter's defaults.
type Options struct {
	Wait           time.Duration // core.NoWait: one attempt
	TTL            time.Duration
	ReleaseTimeout time.Duration
	MaxBodySize    int64
	FailOpen       bool
	Logger         *slog.Logger // nil: the adapter's default
	// CustomBusy replaces the busy answer with one that writes status 429
	// and the body "custom busy" (the Retry-After header is the adapter's
	// to set before it runs).
	CustomBusy bool
	// CustomError replaces the error answer (503 and others) with one that
	// writes the status the adapter chose and the body "custom error".
	CustomError bool
	// LockOptions are passed to the adapter's lock options.
	LockOptions []core.LockOption
}

// Handler is a route's handler, framework-neutral. The stack calls it with
// ctx as the framework hands a handler its request context (net/http:
// r.Context(); Gin: c.Request.Context(); Fiber v3: the fiber.Ctx itself;
// ...), lease as the adapter's FromContext returns it (nil when the handler
// runs without a lock: fail-open), and the request as the handler sees it
// after the middleware: its body read in full, and its form values (form
// returns "" for none). The stack writes the returned status and body; a
// panic in the handler goes to the framework's recovery.
type Handler func(ctx context.Context, lease *core.Lease, req Request) (status int, body string)

// Request is what a Handler sees of the request.
type Request struct {
	Body []byte
	Form func(name string) string
}

// Run runs the suite against s: one subtest per behaviour, each on its own
// redis-server.
func Run(t *testing.T, s Stack) {
	t.Helper()
	run(t, s)
}
