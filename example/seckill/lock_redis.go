package seckill

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	fiberlock "github.com/lockgate/lockgate/middleware/fiber"
	httplock "github.com/lockgate/lockgate/middleware/nethttp"
)

// OrderKeyTemplate is the lock key of the order route for the HTTP
// middleware: the user from the query, the voucher from the path; it
// resolves to OrderKey(user, voucher).
const OrderKeyTemplate = "order:{query.user_id}:{path.voucher_id}"

// fiberRedisLock is the one line of lockgate middleware: the handler runs
// holding "order:<user>:<voucher>" in Redis, with c.UserContext() set to
// the lease's context (its fence goes into the order). Busy → 429 with
// Retry-After, Redis down → 503 and the handler does not run.
func (cfg Config) fiberRedisLock() fiber.Handler {
	return fiberlock.New(fiberlock.Config{Locker: cfg.Locker, Key: OrderKeyTemplate, Wait: cfg.Wait, TTL: cfg.TTL, Logger: cfg.Logger})
}

// httpRedisLock is fiberRedisLock for net/http: r.Context() is the lease's
// context in the handler.
func (cfg Config) httpRedisLock(next http.Handler) http.Handler {
	return httplock.Must(httplock.New(cfg.Locker, OrderKeyTemplate,
		httplock.WithWait(cfg.Wait), httplock.WithTTL(cfg.TTL), httplock.WithLogger(cfg.Logger)))(next)
}
