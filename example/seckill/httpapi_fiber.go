package seckill

import (
	"context"
	"errors"

	"github.com/gofiber/fiber/v2"
)

type ctxKey int

const (
	userIDKey ctxKey = iota
	voucherIDKey
)

// NewFiberApp returns the service's HTTP API on fiber:
//
//	POST /voucher-order/seckill/:voucher_id?user_id=N  → 200 {"order_id": N}
//	GET  /vouchers/:voucher_id                         → 200 {"id","stock","orders"}
//	GET  /healthz                                      → 200 ok
//
// The order route checks the ids (400 naming the field) and the voucher
// (404) before any lock is taken, then locks per cfg.Mode: with LockRedis
// through the one-line lockgate middleware (429 with Retry-After when
// busy, 503 when Redis is down). Bodies over cfg.BodyLimit are 413.
// Errors: a Config without Service, or without Locker in LockRedis.
func NewFiberApp(cfg Config) (*fiber.App, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	app := fiber.New(fiber.Config{
		BodyLimit:             cfg.BodyLimit,
		DisableStartupMessage: true,
		ErrorHandler:          fiberError,
	})
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.SendString("ok") })
	app.Get("/vouchers/:voucher_id", func(c *fiber.Ctx) error {
		id, err := parseID("voucher_id", c.Params("voucher_id"))
		if err != nil {
			return c.Status(fiber.StatusBadRequest).JSON(errorReply{err.Error()})
		}
		v, err := cfg.Service.Store.Voucher(c.UserContext(), id)
		if err != nil {
			code, msg := cfg.outcome(c.UserContext(), err)
			return c.Status(code).JSON(errorReply{msg})
		}
		return c.JSON(v)
	})
	app.Post("/voucher-order/seckill/:voucher_id", cfg.fiberValidate, cfg.fiberLock(), cfg.fiberOrder)
	return app, nil
}

// fiberValidate checks the ids and that the voucher exists; nothing is
// locked or written when it answers.
func (cfg Config) fiberValidate(c *fiber.Ctx) error {
	voucherID, err := parseID("voucher_id", c.Params("voucher_id"))
	if err != nil {
		return c.Status(fiber.StatusBadRequest).JSON(errorReply{err.Error()})
	}
	userID, err := parseID("user_id", c.Query("user_id"))
	if err != nil {
		return c.Status(fiber.StatusBadRequest).JSON(errorReply{err.Error()})
	}
	ok, err := cfg.Service.Store.VoucherExists(c.UserContext(), voucherID)
	if err != nil {
		code, msg := cfg.outcome(c.UserContext(), err)
		return c.Status(code).JSON(errorReply{msg})
	}
	if !ok {
		return c.Status(fiber.StatusNotFound).JSON(errorReply{MsgUnknownVoucher})
	}
	c.Locals(userIDKey, userID)
	c.Locals(voucherIDKey, voucherID)
	return c.Next()
}

// fiberLock returns the lock step of cfg.Mode.
func (cfg Config) fiberLock() fiber.Handler {
	switch cfg.Mode {
	case LockRedis:
		return cfg.fiberRedisLock()
	case LockLocal:
		return func(c *fiber.Ctx) error {
			ctx, cancel := context.WithTimeout(c.UserContext(), cfg.Wait)
			unlock, err := cfg.local.Lock(ctx, OrderKey(c.Locals(userIDKey).(int64), c.Locals(voucherIDKey).(int64)))
			cancel()
			if err != nil {
				c.Set(fiber.HeaderRetryAfter, "1")
				return c.Status(fiber.StatusTooManyRequests).JSON(errorReply{"System busy, please try later"})
			}
			defer unlock()
			return c.Next()
		}
	}
	return func(c *fiber.Ctx) error { return c.Next() }
}

// fiberOrder is the handler: it runs with the lease's context as the
// request's user context when a Redis lock guards it.
func (cfg Config) fiberOrder(c *fiber.Ctx) error {
	ctx := c.UserContext()
	id, err := cfg.Service.Order(ctx, c.Locals(userIDKey).(int64), c.Locals(voucherIDKey).(int64))
	if err != nil {
		code, msg := cfg.outcome(ctx, err)
		return c.Status(code).JSON(errorReply{msg})
	}
	return c.JSON(orderReply{OrderID: id})
}

// fiberError renders fiber's own errors (413 body too large, 404 no route,
// 405) as JSON; anything else is a 500 without internal text.
func fiberError(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	if errors.As(err, &fe) {
		msg := fe.Message
		if fe.Code == fiber.StatusRequestEntityTooLarge {
			msg = MsgBodyTooLarge
		}
		return c.Status(fe.Code).JSON(errorReply{msg})
	}
	return c.Status(fiber.StatusInternalServerError).JSON(errorReply{MsgInternal})
}
