package seckill

import (
	"errors"

	fiberv3 "github.com/gofiber/fiber/v3"
	adaptorv3 "github.com/gofiber/fiber/v3/middleware/adaptor"
	"github.com/valyala/fasthttp"
)

// NewFiberV3App is NewFiberApp on Fiber v3 (serve -http fiberv3): the same
// routes, checks, outcomes, timeouts and framing checks. With LockRedis the
// order route is locked by middleware/fiberv3, whose lease's context is
// c.Context() in the handler (v3 has no UserContext: the request context
// is c.Context(), set with c.SetContext). Serve it with
// app.Listener(ln, fiberv3.ListenConfig{DisableStartupMessage: true}) (as
// NewStackServer does). Errors: as NewFiberApp.
func NewFiberV3App(cfg Config) (*fiberv3.App, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	to := cfg.Timeouts
	// Every setting as in NewFiberApp, where each is explained; v3 moved
	// the startup message to the ListenConfig.
	app := fiberv3.New(fiberv3.Config{
		BodyLimit:                    cfg.BodyLimit,
		ErrorHandler:                 fiberV3Error,
		ReadTimeout:                  to.ReadHeader, // extended for the body below
		WriteTimeout:                 to.Write,
		IdleTimeout:                  to.Idle,
		ReadBufferSize:               4096,
		StreamRequestBody:            false,
		DisablePreParseMultipartForm: true,
		UnescapePath:                 false,
	})
	srv := app.Server()
	if extra := to.Read - to.ReadHeader; extra > 0 {
		srv.HeaderReceived = func(*fasthttp.RequestHeader) fasthttp.RequestConfig {
			return fasthttp.RequestConfig{ReadTimeout: extra}
		}
	}
	srv.CloseOnShutdown = true
	app.Use(fiberV3Framing)
	app.Get("/healthz", func(c fiberv3.Ctx) error { return c.SendString("ok") })
	if cfg.Metrics != nil {
		app.Get("/metrics", adaptorv3.HTTPHandler(cfg.Metrics))
	}
	app.Get("/vouchers/:voucher_id", func(c fiberv3.Ctx) error {
		id, err := parseID("voucher_id", c.Params("voucher_id"))
		if err != nil {
			return c.Status(fiberv3.StatusBadRequest).JSON(errorReply{err.Error()})
		}
		v, err := cfg.Service.Store.Voucher(c.Context(), id)
		if err != nil {
			code, msg := cfg.outcome(c.Context(), err)
			return c.Status(code).JSON(errorReply{msg})
		}
		return c.JSON(v)
	})
	const orderRoute = "/voucher-order/seckill/:voucher_id"
	var order []any
	if cfg.Tracer != nil {
		order = append(order, cfg.fiberV3Trace(fiberv3.MethodPost, orderRoute))
	}
	order = append(order, cfg.fiberV3Validate, cfg.fiberV3Lock(), cfg.fiberV3Order)
	app.Post(orderRoute, order[0], order[1:]...) // run in the order given

	return app, nil
}

// fiberV3Framing is fiberFraming on Fiber v3 (the same fasthttp): 400
// and Connection: close for several Content-Length headers, any
// Transfer-Encoding, or whitespace before a header's colon.
func fiberV3Framing(c fiberv3.Ctx) error {
	if ambiguousFraming(c.Request().Header.RawHeaders()) {
		c.RequestCtx().SetConnectionClose()
		return c.Status(fiberv3.StatusBadRequest).JSON(errorReply{MsgBadFraming})
	}
	return c.Next()
}

// fiberV3Validate is fiberValidate on Fiber v3.
func (cfg Config) fiberV3Validate(c fiberv3.Ctx) error {
	id, code, msg := cfg.checkOrder(c.Context(), c.Params("voucher_id"), c.Query("user_id"))
	if code != 0 {
		return c.Status(code).JSON(errorReply{msg})
	}
	c.Locals(idsKey{}, id)
	return c.Next()
}

// fiberV3Lock returns the lock step of cfg.Mode.
func (cfg Config) fiberV3Lock() fiberv3.Handler {
	switch cfg.Mode {
	case LockRedis:
		return cfg.fiberV3RedisLock()
	case LockLocal:
		return func(c fiberv3.Ctx) error {
			unlock, ok := cfg.lockLocal(c.Context(), c.Locals(idsKey{}).(ids))
			if !ok {
				c.Set(fiberv3.HeaderRetryAfter, "1")
				return c.Status(fiberv3.StatusTooManyRequests).JSON(errorReply{MsgBusy})
			}
			defer unlock()
			return c.Next()
		}
	}
	return func(c fiberv3.Ctx) error { return c.Next() }
}

// fiberV3Order is the handler: with a Redis lock, c.Context() is the
// lease's context (not c itself, whose Done never fires: see
// middleware/fiberv3's doc).
func (cfg Config) fiberV3Order(c fiberv3.Ctx) error {
	ctx := c.Context()
	id := c.Locals(idsKey{}).(ids)
	orderID, err := cfg.Service.Order(ctx, id.user, id.voucher)
	if err != nil {
		code, msg := cfg.outcome(ctx, err)
		if ra := orderRetryAfter(err); ra != "" {
			c.Set(fiberv3.HeaderRetryAfter, ra)
		}
		return c.Status(code).JSON(errorReply{msg})
	}
	return c.JSON(orderReply{OrderID: orderID})
}

// fiberV3Error is fiberError on Fiber v3: fixed texts, never fasthttp's.
func fiberV3Error(c fiberv3.Ctx, err error) error {
	var fe *fiberv3.Error
	if errors.As(err, &fe) {
		return c.Status(fe.Code).JSON(errorReply{fixedErrorText(fe.Code)})
	}
	return c.Status(fiberv3.StatusInternalServerError).JSON(errorReply{MsgInternal})
}
