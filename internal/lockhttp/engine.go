package lockhttp

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/lockgate/lockgate/core"
)

// Shim is what an adapter tells the Engine about its framework. C is the
// adapter's handle on one request (*gin.Context, *fiber.Ctx, fiber.Ctx, or
// a small struct of what its handler is given: the writer, the request and
// the next handler for net/http, the echo.Context and the next handler for
// Echo), R what the framework's handlers return (error for Echo and Fiber,
// struct{} for net/http and Gin, whose handlers return nothing).
//
// The Engine holds the flow every adapter shares; a Shim only reads and
// writes its framework's request and response.
type Shim[C, R any] interface {
	// Skip reports whether the middleware is skipped for c: the rest of
	// the chain runs (Next), nothing is read or taken.
	Skip(c C) bool
	// Key reads the route's key for c (the body first when route.Body);
	// on failure it returns the status to answer (400, 413) and the error.
	Key(c C, route *Route) (key string, status int, err error)
	// Context is the request's context: the lock is waited for under it
	// and the lease's Context derives from it.
	Context(c C) context.Context
	// Next runs the rest of the chain as it is (skipped, fail-open).
	Next(c C) R
	// Locked runs the rest of the chain with lease's Context as the
	// request's context, and puts c back as it was when the chain returns
	// or panics, before the lease is released.
	Locked(c C, lease *core.Lease) R
	// Busy answers 429: it sets the Retry-After header to retryAfter and
	// runs the busy answer (err matches core.ErrNotObtained).
	Busy(c C, retryAfter string, err error) R
	// Error answers status (400, 413, 499, 500 or 503) for err; when
	// retryAfter is not empty (503: UnavailableRetryAfter) it first sets
	// the Retry-After header to it.
	Error(c C, status int, retryAfter string, err error) R
	// Route is the pattern of the route the router matched for c, as the
	// router writes it ("/v/:voucher", "POST /v/{voucher}"), or "" when
	// the adapter cannot tell.
	Route(c C) string
}

// UnavailableRetryAfter is the Retry-After header of every 503 answer:
// one second, a short pause before the client tries again.
const UnavailableRetryAfter = "1"

// Engine is one route's middleware, the same for every adapter: skip,
// read the key, take the lock (shared with Route.Shared, or, with
// Route.Limit, a permit of the semaphore named by the key), answer a failure as Decide says (logged by
// Report), or run the rest of the chain under the lease and release it
// afterwards, also when the chain panics (Release).
type Engine[C, R any] struct {
	Locker   *core.Locker
	Route    Route
	FailOpen bool
	Logger   *slog.Logger // not nil
	Shim     Shim[C, R]
	// Logged holds the routes whose unfillable path placeholder was
	// logged (once per route); nil logs every time.
	Logged *sync.Map
}

// Serve runs the middleware for one request.
func (e *Engine[C, R]) Serve(c C) R {
	s := e.Shim
	if s.Skip(c) {
		return s.Next(c)
	}
	key, status, err := s.Key(c, &e.Route)
	if err != nil {
		if status == http.StatusBadRequest {
			if name, ok := MissingPathParam(err); ok {
				if route := s.Route(c); route == "" || !HasParam(route, name) {
					err = e.misconfigured(s.Context(c), route, err)
					return s.Error(c, http.StatusInternalServerError, "", err)
				}
			}
		}
		return s.Error(c, status, "", err)
	}
	parent := s.Context(c)
	lease, err := e.take(parent, key)
	if err != nil {
		return e.failed(c, parent, err)
	}
	// Deferred: the release runs on return and while a panic unwinds (the
	// panic goes on to the framework), after Locked has put c back. Unlock
	// is detached from parent's cancellation and bounded by the release
	// timeout, so a request already over still releases its lock; a lease
	// known lost returns at once.
	defer Release(parent, e.Logger, lease)
	return s.Locked(c, lease)
}

// take is the route's lease on key: its lock, taken shared on a shared
// route, or with a limit one of the permits of the semaphore named key.
// Busy, unavailable and the other outcomes are answered alike.
func (e *Engine[C, R]) take(ctx context.Context, key string) (*core.Lease, error) {
	if e.Route.Shared {
		return e.Locker.RLock(ctx, key, e.Route.LockOpts...)
	}
	if n := e.Route.Limit; n > 0 {
		return e.Locker.Semaphore(ctx, key, n, e.Route.LockOpts...)
	}
	return e.Locker.Lock(ctx, key, e.Route.LockOpts...)
}

func (e *Engine[C, R]) failed(c C, ctx context.Context, err error) R {
	d := Decide(err, e.FailOpen, ctx)
	d.Report(ctx, e.Logger, e.Route.Template.String(), err)
	switch d.Status {
	case 0:
		return e.Shim.Next(c)
	case http.StatusTooManyRequests:
		return e.Shim.Busy(c, strconv.Itoa(core.RetryAfterSeconds(err)), err)
	}
	retryAfter := ""
	if d.Status == http.StatusServiceUnavailable {
		retryAfter = UnavailableRetryAfter
	}
	return e.Shim.Error(c, d.Status, retryAfter, err)
}

// misconfigured logs, once per route, that the route's key template names
// a path parameter its route does not have, and returns the error of the
// 500 answer (internal: never sent).
func (e *Engine[C, R]) misconfigured(ctx context.Context, route string, err error) error {
	shown := route
	if shown == "" {
		shown = "(unknown)"
	}
	if e.Logged == nil {
		e.logMisconfigured(ctx, shown, err)
	} else if _, loaded := e.Logged.LoadOrStore(route, struct{}{}); !loaded {
		e.logMisconfigured(ctx, shown, err)
	}
	return &MisconfiguredError{Template: e.Route.Template.String(), Route: shown, Err: err}
}

func (e *Engine[C, R]) logMisconfigured(ctx context.Context, route string, err error) {
	e.Logger.ErrorContext(ctx, "lockgate: the key template names a path parameter the route does not have; answering 500 to every request of the route",
		slog.String("pattern", e.Route.Template.String()), slog.String("route", route), slog.Any("error", err))
}
