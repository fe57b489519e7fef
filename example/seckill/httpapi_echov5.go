package seckill

import (
	"context"
	"errors"
	"net/http"

	echov5 "github.com/labstack/echo/v5"
	middlewarev5 "github.com/labstack/echo/v5/middleware"
)

// NewEchoV5Handler is NewEchoHandler on Echo v5 (serve -http echov5): the
// same routes, checks and outcomes. With LockRedis the order route is
// locked by middleware/echov5 (echolock for Echo v5), which sets
// c.Request()'s context to the lease's. Echo v5's default router, as v4's,
// routes on the raw path and hands a parameter on undecoded: "%31" is not
// a voucher id here (a 400, nothing locked). Echo logs with cfg.Logger.
// Errors the app returns (no route, 405, a panic) are answered {"error":
// "..."} like every other answer (echoV5Error). Serve it with
// NewStackServer. Errors: as NewFiberApp.
func NewEchoV5Handler(cfg Config) (http.Handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := echov5.New()
	e.Logger = cfg.Logger // Echo v5 logs with slog
	e.HTTPErrorHandler = echoV5Error
	// A panicking handler is answered 500, its lock released.
	e.Use(middlewarev5.Recover())
	e.GET("/healthz", func(c *echov5.Context) error { return c.String(http.StatusOK, "ok") })
	if cfg.Metrics != nil {
		e.GET("/metrics", echov5.WrapHandler(cfg.Metrics))
	}
	e.GET("/vouchers/:voucher_id", func(c *echov5.Context) error {
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
	var mw []echov5.MiddlewareFunc
	if cfg.Tracer != nil {
		mw = append(mw, cfg.echoV5Trace(http.MethodPost, orderRoute))
	}
	mw = append(mw, cfg.echoV5Validate, cfg.echoV5Lock())
	e.POST(orderRoute, func(c *echov5.Context) error { cfg.httpOrder(c.Response(), c.Request()); return nil }, mw...)
	return httpFraming(e), nil
}

// echoV5Validate is echoValidate on Echo v5.
func (cfg Config) echoV5Validate(next echov5.HandlerFunc) echov5.HandlerFunc {
	return func(c *echov5.Context) error {
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

// echoV5Lock is echoLock on Echo v5.
func (cfg Config) echoV5Lock() echov5.MiddlewareFunc {
	switch cfg.Mode {
	case LockRedis:
		return cfg.echoV5RedisLock()
	case LockLocal:
		return func(next echov5.HandlerFunc) echov5.HandlerFunc {
			return func(c *echov5.Context) error {
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
	return func(next echov5.HandlerFunc) echov5.HandlerFunc { return next }
}

// echoV5Error is echoError on Echo v5, where Echo's own errors (404 no
// route, 405) are status errors (echo.StatusCode) rather than
// *echo.HTTPError: below 500 the answer is the HTTPError's Message, or the
// status text; 500 and above MsgInternal.
func echoV5Error(c *echov5.Context, err error) {
	if resp, _ := echov5.UnwrapResponse(c.Response()); resp != nil && resp.Committed {
		return
	}
	code, msg := echov5.StatusCode(err), MsgInternal
	if code == 0 {
		code = http.StatusInternalServerError
	}
	if code < http.StatusInternalServerError {
		msg = http.StatusText(code)
		var he *echov5.HTTPError
		if errors.As(err, &he) && he.Message != "" {
			msg = he.Message
		}
	}
	if c.Request().Method == http.MethodHead {
		c.NoContent(code)
		return
	}
	c.JSON(code, errorReply{msg})
}
