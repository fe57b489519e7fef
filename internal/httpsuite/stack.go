// Package httpsuite is the one behaviour suite every HTTP adapter runs
// (net/http, chi through it, Fiber v2 and v3, Gin, Echo): given a Stack —
// a way to serve routes locked by the adapter under test — Run checks on a
// real redis-server everything the adapters promise alike: bad input, busy
// with Retry-After, Redis down fail-closed and fail-open, a lost lock
// cancelling the handler, a panic releasing, one request at a time with a
// control that overlaps, different keys in parallel, typed placeholders,
// the lease in the handler's context, replaceable answers, the pattern
// naming the lock, a limit of N requests of one key at once, and shared
// (read) locks beside an exclusive writer. SetupErrors (and OptionSetup's
// OptionsSetupErrors for adapters with options) is the table of bad setups
// every adapter refuses; BenchRoute, BenchCoreCycle and BenchOverhead are
// the benchmarks every adapter runs over its Stack. Adapter-specific
// behaviour (the controls of setup, options of one framework,
// Skipper/Next) stays in each adapter's tests.
//
// Besides what Stack, Route and Handler say, the cases take for granted of
// every adapter what net/http's does: error answers are {"error": "..."}
// with a JSON Content-Type; the lock is released before the answer reaches
// the client (also after a panic); {ctx.name} reads values stored in the
// request's context with keyfunc.WithValue; path parameters are locked
// decoded (unless RawPathParams). A stack for a framework that cannot do
// something says so with its flags (NoClientCancel, NoRequestContext,
// RawPathParams), which skip the cases that need it, never silently.
package httpsuite

import (
	"context"
	"log/slog"
	"regexp"
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
	//
	// Serve may be called more than once in a test: each call is one more
	// server (the suite's "instances": two servers, each with its routes
	// on its own Locker, on one Redis). It must honour Route.Bare and, unless
	// NoRequestContext, Route.Context.
	Serve func(t testing.TB, routes []Route) string

	// NoClientCancel says that the framework does not cancel a handler's
	// request context when the client goes away (fasthttp: Fiber v2 and
	// v3). The cases in which the client hangs up mid-request are skipped;
	// their variants through Route.Context still run.
	NoClientCancel bool
	// NoRequestContext says that the stack cannot run Route.Context: no
	// earlier middleware can set the context the adapter locks with (a
	// deadline, a cancellation, a value for {ctx.name}). The cases that
	// need one are skipped. No stack of this repository sets it.
	NoRequestContext bool
	// RawPathParams says that the router hands a path parameter on as the
	// client percent-encoded it, where Go's URL parser keeps that encoding
	// (chi: /seckill/%37 gives chi.URLParam and r.PathValue "%37", where
	// http.ServeMux gives "7"), and the adapter locks that raw text, the
	// value the router's handlers see. The PathUnescaped case is skipped;
	// the adapter's doc must say how to lock the decoded value.
	RawPathParams bool
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

	// Bare serves Handler without the adapter's middleware (Locker, Key and
	// Options are ignored): the controls that show that a case can fail.
	Bare bool
	// Context, when set, runs in front of the middleware as an earlier
	// middleware would (a timeout, an authentication): the context it
	// returns, given the request's, becomes the request's context, the
	// one the adapter locks with and the handler's ctx derives from.
	// net/http: next.ServeHTTP(w, r.WithContext(Context(r.Context())));
	// Gin: c.Request = c.Request.WithContext(...); Echo:
	// c.SetRequest(c.Request().WithContext(...)); Fiber v2:
	// c.SetUserContext(Context(c.UserContext())); Fiber v3:
	// c.SetContext(Context(c.Context())).
	Context func(parent context.Context) context.Context
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
	// Limit is the adapter's limit of requests of one key at once
	// (WithLimit, Config.Limit); 0 sets none: the lock.
	Limit int
	// Shared takes the key's lock shared (WithShared, Config.Shared).
	Shared bool
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

// ColonPath writes a Route.Path's {name} parameters in the :name syntax of
// Fiber, Gin and Echo ("/seckill/{voucher}" is "/seckill/:voucher").
func ColonPath(path string) string { return colonParam.ReplaceAllString(path, ":$1") }

var colonParam = regexp.MustCompile(`\{([^{}/]+)\}`)
