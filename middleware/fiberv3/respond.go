package fiberlock

import (
	"github.com/gofiber/fiber/v3"

	"github.com/lockgate/lockgate/internal/lockhttp"
)

// StatusClientClosedRequest (499, "client closed request", as nginx logs
// it) answers a request whose request context (c.Context()) was cancelled
// while it waited for the lock: nobody waits for the answer any more, but
// the access log tells it apart from a server failure.
const StatusClientClosedRequest = lockhttp.StatusClientClosedRequest

func jsonError(c fiber.Ctx, status int, msg string) error {
	return c.Status(status).JSON(fiber.Map{"error": msg})
}

func defaultLimitReached(c fiber.Ctx) error {
	return jsonError(c, fiber.StatusTooManyRequests, lockhttp.MsgBusy)
}

func defaultErrorHandler(c fiber.Ctx, status int, err error) error {
	return jsonError(c, status, lockhttp.Message(status, err))
}
