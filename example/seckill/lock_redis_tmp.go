package seckill

import (
	"context"
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/lockgate/lockgate/core"
)

// TEMPORARY until middleware/fiber lands: the same translation the
// middleware does (key → Lock, outcome → status).
func (cfg Config) fiberRedisLock() fiber.Handler {
	return func(c *fiber.Ctx) error {
		key := OrderKey(c.Locals(userIDKey).(int64), c.Locals(voucherIDKey).(int64))
		lease, err := cfg.Locker.Lock(c.UserContext(), key, core.WithWait(cfg.Wait), core.WithTTL(cfg.TTL))
		if err != nil {
			code, msg := lockStatus(err)
			if code == http.StatusTooManyRequests {
				d, _ := core.RetryAfter(err)
				c.Set(fiber.HeaderRetryAfter, retryAfterSeconds(d))
			}
			return c.Status(code).JSON(errorReply{msg})
		}
		defer lease.Unlock(context.WithoutCancel(c.UserContext()))
		prev := c.UserContext()
		c.SetUserContext(lease.Context())
		defer c.SetUserContext(prev)
		return c.Next()
	}
}

func lockStatus(err error) (int, string) {
	switch {
	case errors.Is(err, core.ErrNotObtained):
		return http.StatusTooManyRequests, "System busy, please try later"
	case errors.Is(err, core.ErrInvalid):
		return http.StatusBadRequest, "invalid lock key"
	}
	return http.StatusServiceUnavailable, "Lock service unavailable"
}

func (cfg Config) httpRedisLock(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Context().Value(idsKey{}).(ids)
		lease, err := cfg.Locker.Lock(r.Context(), OrderKey(id.user, id.voucher), core.WithWait(cfg.Wait), core.WithTTL(cfg.TTL))
		if err != nil {
			code, msg := lockStatus(err)
			if code == http.StatusTooManyRequests {
				d, _ := core.RetryAfter(err)
				w.Header().Set("Retry-After", retryAfterSeconds(d))
			}
			writeJSON(w, code, errorReply{msg})
			return
		}
		defer lease.Unlock(context.WithoutCancel(r.Context()))
		next.ServeHTTP(w, r.WithContext(lease.Context()))
	})
}
