package seckill

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	fiberv3 "github.com/gofiber/fiber/v3"
	"github.com/labstack/echo/v4"
	echov5 "github.com/labstack/echo/v5"

	echolock "github.com/lockgate/lockgate/middleware/echo"
	echov5lock "github.com/lockgate/lockgate/middleware/echov5"
	fiberlock "github.com/lockgate/lockgate/middleware/fiber"
	fiberv3lock "github.com/lockgate/lockgate/middleware/fiberv3"
	ginlock "github.com/lockgate/lockgate/middleware/gin"
	httplock "github.com/lockgate/lockgate/middleware/nethttp"
)

// OrderKeyTemplate is the lock key of the order route for the HTTP
// middleware: the user from the query, the voucher from the path, both
// typed ":int", so the key is built from the number the handler orders for
// (parseID reads the ids with strconv.ParseInt, as ":int" does): "01",
// "+1" and "1" are one user and one lock. It resolves to OrderKey(user,
// voucher). Untyped, a client spelling one user several ways got several
// locks and several orders. Every HTTP stack's adapter takes it as is.
const OrderKeyTemplate = "order:{query.user_id:int}:{path.voucher_id:int}"

// The one line of lockgate middleware of each HTTP stack, with the same
// key template, wait, TTL and logger: the handler runs holding
// "order:<user>:<voucher>" in Redis, with the request's context set to the
// lease's context (its fence goes into the order). Busy → 429 with
// Retry-After, Redis down → 503 and the handler does not run; a key that
// does not parse → 400 naming the part (the checks before answer it
// first). The lease is in:
//
//	fiber    c.UserContext()       (middleware/fiber)
//	fiberv3  c.Context()           (middleware/fiberv3)
//	nethttp  r.Context()           (middleware/nethttp)
//	chi      r.Context()           (middleware/nethttp, given to With)
//	gin      c.Request.Context()   (middleware/gin)
//	echo     c.Request().Context() (middleware/echo)
//	echov5   c.Request().Context() (middleware/echov5)

// fiberRedisLock is the lock of Fiber v2 (fiberlock.New panics on a bad
// Config, as Fiber's own middleware do).
func (cfg Config) fiberRedisLock() fiber.Handler {
	return fiberlock.New(fiberlock.Config{Locker: cfg.Locker, Key: cfg.keyTemplate(), Wait: cfg.Wait, TTL: cfg.TTL, Logger: cfg.Logger})
}

// fiberV3RedisLock is the lock of Fiber v3 (the same Config as v2's).
func (cfg Config) fiberV3RedisLock() fiberv3.Handler {
	return fiberv3lock.New(fiberv3lock.Config{Locker: cfg.Locker, Key: cfg.keyTemplate(), Wait: cfg.Wait, TTL: cfg.TTL, Logger: cfg.Logger})
}

// httpRedisLock is the lock of net/http and chi.
func (cfg Config) httpRedisLock(next http.Handler) http.Handler {
	return httplock.Must(httplock.New(cfg.Locker, cfg.keyTemplate(),
		httplock.WithWait(cfg.Wait), httplock.WithTTL(cfg.TTL), httplock.WithLogger(cfg.Logger)))(next)
}

// ginRedisLock is the lock of Gin.
func (cfg Config) ginRedisLock() gin.HandlerFunc {
	return ginlock.Must(ginlock.New(cfg.Locker, cfg.keyTemplate(),
		ginlock.WithWait(cfg.Wait), ginlock.WithTTL(cfg.TTL), ginlock.WithLogger(cfg.Logger)))
}

// echoRedisLock is the lock of Echo v4.
func (cfg Config) echoRedisLock() echo.MiddlewareFunc {
	return echolock.Must(echolock.NewWithConfig(echolock.Config{Locker: cfg.Locker, Key: cfg.keyTemplate(), Wait: cfg.Wait, TTL: cfg.TTL, Logger: cfg.Logger}))
}

// echoV5RedisLock is the lock of Echo v5 (the same Config as v4's).
func (cfg Config) echoV5RedisLock() echov5.MiddlewareFunc {
	return echov5lock.Must(echov5lock.NewWithConfig(echov5lock.Config{Locker: cfg.Locker, Key: cfg.keyTemplate(), Wait: cfg.Wait, TTL: cfg.TTL, Logger: cfg.Logger}))
}

// keyTemplate is OrderKeyTemplate, unless a test replaces it (to show the
// bypass the typed placeholders close).
func (cfg Config) keyTemplate() string {
	if cfg.orderKey != "" {
		return cfg.orderKey
	}
	return OrderKeyTemplate
}
