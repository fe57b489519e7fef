package echolock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/lockhttp"
)

// ErrNoLocker is returned by New and NewWithConfig for a nil
// Config.Locker. It matches core.ErrInvalid.
var ErrNoLocker = fmt.Errorf("echolock: Config.Locker is nil: %w", core.ErrInvalid)

// New is NewWithConfig with only Locker and Key set, every other field at
// its default:
//
//	e.POST("/orders/:voucher", order, echolock.Must(echolock.New(l, "order:{path.voucher}")))
func New(l *core.Locker, key string) (echo.MiddlewareFunc, error) {
	return NewWithConfig(Config{Locker: l, Key: key})
}

// NewWithConfig returns middleware that runs the rest of the chain while
// holding the lock named by the key template (typed placeholders such as
// {query.user_id:int} canonicalise the value; see package keyfunc).
//
// Answers: 400 for a key error (naming the part), 413 for a body over
// MaxBodySize, BusyHandler (429 with Retry-After) when still busy after the
// wait, 503 when Redis is unavailable (the handler does not run unless
// FailOpen) or the lock fails otherwise (the Locker closed, an unsupported
// server: never fail-open), 503 when the request's deadline passes while
// waiting, 499 (StatusClientClosedRequest) when it is cancelled. The lease
// is released after the handler returns, returns an error, or panics (the
// panic goes on to Echo's Recover middleware), within ReleaseTimeout.
//
// NewWithConfig checks the whole Config at setup, so that a mistake is an
// error here rather than an answer to every request. Errors, each naming
// the field: ErrNoLocker for a nil Locker; an error matching
// keyfunc.ErrBadTemplate (a *keyfunc.Error for a malformed template or one
// naming a source HTTP cannot read) for no Key nor Template, or a bad one;
// an error matching core.ErrInvalid for an invalid Wait, TTL,
// ReleaseTimeout, MaxBodySize or LockOptions entry.
func NewWithConfig(cfg Config) (echo.MiddlewareFunc, error) {
	m, err := build(cfg)
	if err != nil {
		return nil, err
	}
	return m.wrap, nil
}

// Must returns mw and panics if err is not nil, for one-line route setup:
//
//	lock := echolock.Must(echolock.NewWithConfig(echolock.Config{Locker: l, Key: "order:{path.voucher}"}))
func Must(mw echo.MiddlewareFunc, err error) echo.MiddlewareFunc {
	if err != nil {
		panic(err)
	}
	return mw
}

// FromContext returns the lease held for the request whose context is ctx
// (the handler's c.Request().Context(), or a context derived from it), or
// nil when no lock is held (the handler runs fail-open, or was skipped).
func FromContext(ctx context.Context) *core.Lease { return core.FromContext(ctx) }

type lockMiddleware struct {
	cfg   Config
	route lockhttp.Route // the template, the combined lock options
}

// build checks cfg and compiles it.
func build(cfg Config) (*lockMiddleware, error) {
	cfg = withDefaults(cfg)
	s := lockhttp.NewSetup("echolock")
	if cfg.Locker == nil {
		return nil, ErrNoLocker
	}
	route, err := s.ConfigRoute(lockhttp.Fields{Key: cfg.Key, Template: cfg.Template, Wait: cfg.Wait, TTL: cfg.TTL,
		ReleaseTimeout: cfg.ReleaseTimeout, LockOptions: cfg.LockOptions, MaxBodySize: cfg.MaxBodySize})
	if err != nil {
		return nil, err
	}
	return &lockMiddleware{cfg: cfg, route: route}, nil
}

func (m *lockMiddleware) wrap(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error { return m.handle(next, c) }
}

func (m *lockMiddleware) handle(next echo.HandlerFunc, c echo.Context) error {
	cfg := &m.cfg
	if cfg.Skipper(c) {
		return next(c)
	}
	r := c.Request()
	q := lockhttp.Request[echo.Context]{R: r, C: c, MaxBody: cfg.MaxBodySize, Path: param, Ctx: cfg.ContextValue}
	if m.route.Body {
		if status, err := q.ReadBody(); err != nil {
			if errors.Is(err, echo.ErrStatusRequestEntityTooLarge) {
				status = http.StatusRequestEntityTooLarge // Echo's BodyLimit in front cut it off
			}
			return cfg.ErrorHandler(c, status, err)
		}
	}
	key, err := m.route.Template.Key(q.Lookup)
	if err != nil {
		return cfg.ErrorHandler(c, http.StatusBadRequest, err)
	}
	parent := r.Context()
	lease, err := cfg.Locker.Lock(parent, key, m.route.LockOpts...)
	if err != nil {
		return m.failed(next, c, parent, err)
	}
	defer func() {
		// Runs on return and while a panic unwinds (the panic goes on to
		// Recover). Outer middleware see the request as they passed it on.
		// Unlock is detached from parent's cancellation and bounded by the
		// release timeout; a lease known lost returns at once.
		c.SetRequest(r)
		lockhttp.Release(parent, cfg.Logger, lease)
	}()
	c.SetRequest(r.WithContext(lease.Context()))
	return next(c)
}

func (m *lockMiddleware) failed(next echo.HandlerFunc, c echo.Context, ctx context.Context, err error) error {
	cfg := &m.cfg
	d := lockhttp.Decide(err, cfg.FailOpen, ctx)
	d.Report(ctx, cfg.Logger, m.route.Template.String(), err)
	switch d.Status {
	case 0:
		return next(c)
	case http.StatusTooManyRequests:
		c.Response().Header().Set(echo.HeaderRetryAfter, strconv.Itoa(core.RetryAfterSeconds(err)))
		return cfg.BusyHandler(c, err)
	}
	return cfg.ErrorHandler(c, d.Status, err)
}
