package seckill

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	fiberlock "github.com/lockgate/lockgate/middleware/fiber"
	httplock "github.com/lockgate/lockgate/middleware/nethttp"
)

// OrderKeyTemplate is the lock key of the order route for the HTTP
// middleware: the user from the query, the voucher from the path, both
// typed ":int", so the key is built from the number the handler orders for
// (parseID reads the ids with strconv.ParseInt, as ":int" does): "01",
// "+1" and "1" are one user and one lock. It resolves to OrderKey(user,
// voucher). Untyped, a client spelling one user several ways got several
// locks and several orders.
const OrderKeyTemplate = "order:{query.user_id:int}:{path.voucher_id:int}"

// fiberRedisLock is the one line of lockgate middleware: the handler runs
// holding "order:<user>:<voucher>" in Redis, with c.UserContext() set to
// the lease's context (its fence goes into the order). Busy → 429 with
// Retry-After, Redis down → 503 and the handler does not run.
func (cfg Config) fiberRedisLock() fiber.Handler {
	return fiberlock.New(fiberlock.Config{Locker: cfg.Locker, Key: cfg.keyTemplate(), Wait: cfg.Wait, TTL: cfg.TTL, Logger: cfg.Logger})
}

// httpRedisLock is fiberRedisLock for net/http: r.Context() is the lease's
// context in the handler.
func (cfg Config) httpRedisLock(next http.Handler) http.Handler {
	return httplock.Must(httplock.New(cfg.Locker, cfg.keyTemplate(),
		httplock.WithWait(cfg.Wait), httplock.WithTTL(cfg.TTL), httplock.WithLogger(cfg.Logger)))(next)
}

// keyTemplate is OrderKeyTemplate, unless a test replaces it (to show the
// bypass the typed placeholders close).
func (cfg Config) keyTemplate() string {
	if cfg.orderKey != "" {
		return cfg.orderKey
	}
	return OrderKeyTemplate
}
