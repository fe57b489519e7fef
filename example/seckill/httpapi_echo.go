package seckill

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// NewEchoHandler is NewHTTPHandler on Echo v4 (serve -http echo): the same
// routes, checks and outcomes. With LockRedis the order route is locked
// by middleware/echo (echolock), which sets c.Request()'s context to the
// lease's. Echo routes on the raw path and hands a parameter on
// undecoded: "%31" is not a voucher id here (a 400, nothing locked), as on
// Fiber. Errors the app returns (no route, 405, a panic) are answered
// {"error": "..."} like every other answer (echoError). Serve it with
// NewStackServer. Errors: as NewFiberApp.
func NewEchoHandler(cfg Config) (http.Handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = echoError
	// A panicking handler is answered 500, its lock released.
	e.Use(middleware.Recover())
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	if cfg.Metrics != nil {
		e.GET("/metrics", echo.WrapHandler(cfg.Metrics))
	}
	e.GET("/vouchers/:voucher_id", func(c echo.Context) error {
		ctx := c.Request().Context()
		id, err := parseID("voucher_id", c.Param("voucher_id"))
		if err != nil {
			return c.JSON(http.StatusBadRequest, errorReply{err.Error()})
		}
		v, err := cfg.Service.Store.Voucher(ctx, id)
		if err != nil {
			code, msg := cfg.outcome(ctx, err)
			return c.JSON(code, errorReply{msg})
		}
		return c.JSON(http.StatusOK, v)
	})
	const orderRoute = "/voucher-order/seckill/:voucher_id"
	// Route middleware: the first is the outermost.
	var mw []echo.MiddlewareFunc
	if cfg.Tracer != nil {
		mw = append(mw, cfg.echoTrace(http.MethodPost, orderRoute))
	}
	mw = append(mw, cfg.echoValidate, cfg.echoLock())
	e.POST(orderRoute, func(c echo.Context) error { cfg.httpOrder(c.Response(), c.Request()); return nil }, mw...)
	return httpFraming(e), nil
}

// echoValidate enforces the body limit and checks the ids and the
// voucher; nothing is locked or written when it answers. The ids go on in
// the request's context.
func (cfg Config) echoValidate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if code, msg := cfg.readBody(c.Response(), r); code != 0 {
			return c.JSON(code, errorReply{msg})
		}
		id, code, msg := cfg.checkOrder(r.Context(), c.Param("voucher_id"), c.QueryParam("user_id"))
		if code != 0 {
			return c.JSON(code, errorReply{msg})
		}
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), idsKey{}, id)))
		return next(c)
	}
}

// echoLock returns the lock step of cfg.Mode.
func (cfg Config) echoLock() echo.MiddlewareFunc {
	switch cfg.Mode {
	case LockRedis:
		return cfg.echoRedisLock()
	case LockLocal:
		return func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				ctx := c.Request().Context()
				unlock, ok := cfg.lockLocal(ctx, ctx.Value(idsKey{}).(ids))
				if !ok {
					c.Response().Header().Set("Retry-After", "1")
					return c.JSON(http.StatusTooManyRequests, errorReply{MsgBusy})
				}
				defer unlock()
				return next(c)
			}
		}
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc { return next }
}

// echoError writes the errors an Echo handler or Echo itself returns (404
// no route, 405, 500 from Recover) as {"error": "..."}, without internal
// text.
func echoError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, msg := http.StatusInternalServerError, MsgInternal
	var he *echo.HTTPError
	if errors.As(err, &he) {
		code = he.Code
		if s, ok := he.Message.(string); ok && code < http.StatusInternalServerError {
			msg = s
		}
	}
	if c.Request().Method == http.MethodHead {
		c.NoContent(code)
		return
	}
	c.JSON(code, errorReply{msg})
}
