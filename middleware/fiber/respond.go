package fiberlock

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/lockgate/lockgate/keyfunc"
)

// Texts of the default answers; internal errors are never sent.
const (
	msgBusy        = "resource is busy, retry later"
	msgUnavailable = "lock service unavailable"
	msgTooLarge    = "request body too large"
)

func jsonError(c *fiber.Ctx, status int, msg string) error {
	return c.Status(status).JSON(fiber.Map{"error": msg})
}

func defaultLimitReached(c *fiber.Ctx) error {
	return jsonError(c, fiber.StatusTooManyRequests, msgBusy)
}

func defaultErrorHandler(c *fiber.Ctx, status int, err error) error {
	msg := msgUnavailable
	switch status {
	case fiber.StatusRequestEntityTooLarge:
		msg = msgTooLarge
	case fiber.StatusBadRequest:
		msg = "bad request"
		var ke *keyfunc.Error
		if errors.As(err, &ke) {
			msg = ke.Error()
		}
	}
	return jsonError(c, status, msg)
}
