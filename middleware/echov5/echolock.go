package echolock

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/lockhttp"
)

// ErrNoLocker is returned by New, NewWithConfig and Config.ToMiddleware
// for a nil Config.Locker. It matches core.ErrInvalid.
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
// It answers as every adapter does (middleware/README.md in the
// repository, Answers); Config.BusyHandler and Config.ErrorHandler
// replace the answers. The lease is released after the handler returns,
// returns an error, or panics (the panic goes on to Echo's Recover
// middleware).
//
// NewWithConfig checks the whole Config at setup, so that a mistake is an
// error here rather than an answer to every request. Errors, each naming
// the field: ErrNoLocker for a nil Locker; an error matching
// keyfunc.ErrBadTemplate (a *keyfunc.Error for a malformed template or one
// naming a source HTTP cannot read) for no Key nor Template, or a bad one;
// an error matching core.ErrInvalid for an invalid Wait, TTL,
// ReleaseTimeout, MaxBodySize or LockOptions entry, a negative Limit, or
// Shared with a Limit.
func NewWithConfig(cfg Config) (echo.MiddlewareFunc, error) {
	m, err := build(cfg)
	if err != nil {
		return nil, err
	}
	return m.wrap, nil
}

// ToMiddleware is NewWithConfig(config), for Echo v5's
// echo.MiddlewareConfigurator: the errors are NewWithConfig's.
func (config Config) ToMiddleware() (echo.MiddlewareFunc, error) { return NewWithConfig(config) }

// Must returns mw and panics if err is not nil, for one-line route setup:
//
//	lock := echolock.Must(echolock.NewWithConfig(echolock.Config{Locker: l, Key: "order:{path.voucher}"}))
func Must(mw echo.MiddlewareFunc, err error) echo.MiddlewareFunc {
	return lockhttp.Must(mw, err)
}

// FromContext returns the lease held for the request whose context is ctx
// (the handler's c.Request().Context(), or a context derived from it), or
// nil when no lock is held (the handler runs fail-open, or was skipped).
func FromContext(ctx context.Context) *core.Lease { return core.FromContext(ctx) }

// lockMiddleware is the shim of the shared engine (lockhttp.Engine) for
// Echo v5.
type lockMiddleware struct {
	cfg Config
	e   lockhttp.Engine[call, error]
}

// call is one request through the middleware.
type call struct {
	c    *echo.Context
	next echo.HandlerFunc
}

// build checks cfg and compiles it.
func build(cfg Config) (*lockMiddleware, error) {
	m := &lockMiddleware{cfg: withDefaults(cfg)}
	cfg = m.cfg
	var err error
	m.e, err = lockhttp.ConfigEngine[call, error]("echolock", lockhttp.Fields{Locker: cfg.Locker, Key: cfg.Key, Template: cfg.Template,
		Wait: cfg.Wait, TTL: cfg.TTL, ReleaseTimeout: cfg.ReleaseTimeout, LockOptions: cfg.LockOptions,
		MaxBodySize: cfg.MaxBodySize, Route: cfg.Route, Limit: cfg.Limit, Shared: cfg.Shared, FailOpen: cfg.FailOpen, Logger: cfg.Logger}, ErrNoLocker, m)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *lockMiddleware) wrap(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error { return m.e.Serve(call{c, next}) }
}

func (m *lockMiddleware) Skip(c call) bool { return m.cfg.Skipper(c.c) }

// Route is the pattern Echo matched ("/v/:voucher").
func (m *lockMiddleware) Route(c call) string { return c.c.Path() }

func (m *lockMiddleware) Key(c call, route *lockhttp.Route) (string, int, error) {
	q := lockhttp.Request[*echo.Context]{R: c.c.Request(), C: c.c, MaxBody: m.cfg.MaxBodySize, Path: param, Ctx: m.cfg.ContextValue}
	key, status, err := q.Key(route)
	if errors.Is(err, echo.ErrStatusRequestEntityTooLarge) {
		status = http.StatusRequestEntityTooLarge // Echo's BodyLimit in front cut it off
	}
	return key, status, err
}

func (m *lockMiddleware) Context(c call) context.Context { return c.c.Request().Context() }

func (m *lockMiddleware) Next(c call) error { return c.next(c.c) }

func (m *lockMiddleware) Locked(c call, lease *core.Lease) error {
	r := c.c.Request()
	// On return and while a panic unwinds (the panic goes on to Recover),
	// before the release: outer middleware see the request as they passed
	// it on.
	defer c.c.SetRequest(r)
	c.c.SetRequest(r.WithContext(lease.Context()))
	return c.next(c.c)
}

func (m *lockMiddleware) Busy(c call, retryAfter string, err error) error {
	c.c.Response().Header().Set(echo.HeaderRetryAfter, retryAfter)
	return m.cfg.BusyHandler(c.c, err)
}

func (m *lockMiddleware) Error(c call, status int, retryAfter string, err error) error {
	if retryAfter != "" {
		c.c.Response().Header().Set(echo.HeaderRetryAfter, retryAfter)
	}
	return m.cfg.ErrorHandler(c.c, status, err)
}
