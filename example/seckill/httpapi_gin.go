package seckill

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"
)

// NewGinHandler is NewHTTPHandler on Gin (serve -http gin): the same
// routes, checks and outcomes. With LockRedis the order route is locked
// by middleware/gin (ginlock), which sets c.Request's context to the
// lease's: the handler passes c.Request.Context() on, never c (with the
// engine's default ContextWithFallback false, c reads nothing of the
// request's context). Gin decodes the path before routing (UseRawPath
// off), so "%31" is voucher 1, as on ServeMux, for the checks and the key
// alike. Gin runs in release mode: no debug lines on stdout (which
// -trace-stdout keeps for spans). Serve it with NewStackServer. Errors:
// as NewFiberApp.
func NewGinHandler(cfg Config) (http.Handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	// A panicking handler is answered 500, its lock released.
	r.Use(gin.Recovery())
	// Nothing here reads c.ClientIP(): trust no forwarding header.
	if err := r.SetTrustedProxies(nil); err != nil {
		return nil, err
	}
	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	if cfg.Metrics != nil {
		r.GET("/metrics", gin.WrapH(cfg.Metrics))
	}
	r.GET("/vouchers/:voucher_id", func(c *gin.Context) {
		ctx := c.Request.Context()
		id, err := parseID("voucher_id", c.Param("voucher_id"))
		if err != nil {
			c.JSON(http.StatusBadRequest, errorReply{err.Error()})
			return
		}
		v, err := cfg.Service.Store.Voucher(ctx, id)
		if err != nil {
			code, msg := cfg.outcome(ctx, err)
			c.JSON(code, errorReply{msg})
			return
		}
		c.JSON(http.StatusOK, v)
	})
	const orderRoute = "/voucher-order/seckill/:voucher_id"
	var order []gin.HandlerFunc
	if cfg.Tracer != nil {
		order = append(order, cfg.ginTrace(http.MethodPost, orderRoute))
	}
	order = append(order, cfg.ginValidate, cfg.ginLock(), func(c *gin.Context) { cfg.httpOrder(c.Writer, c.Request) })
	r.POST(orderRoute, order...)
	return httpFraming(r), nil
}

// ginValidate enforces the body limit and checks the ids and the voucher;
// nothing is locked or written when it answers. The ids go on in the
// request's context.
func (cfg Config) ginValidate(c *gin.Context) {
	if code, msg := cfg.readBody(c.Writer, c.Request); code != 0 {
		c.AbortWithStatusJSON(code, errorReply{msg})
		return
	}
	ctx := c.Request.Context()
	id, code, msg := cfg.checkOrder(ctx, c.Param("voucher_id"), c.Query("user_id"))
	if code != 0 {
		c.AbortWithStatusJSON(code, errorReply{msg})
		return
	}
	c.Request = c.Request.WithContext(context.WithValue(ctx, idsKey{}, id))
	c.Next()
}

// ginLock returns the lock step of cfg.Mode.
func (cfg Config) ginLock() gin.HandlerFunc {
	switch cfg.Mode {
	case LockRedis:
		return cfg.ginRedisLock()
	case LockLocal:
		return func(c *gin.Context) {
			unlock, ok := cfg.lockLocal(c.Request.Context(), c.Request.Context().Value(idsKey{}).(ids))
			if !ok {
				c.Header("Retry-After", "1")
				c.AbortWithStatusJSON(http.StatusTooManyRequests, errorReply{MsgBusy})
				return
			}
			defer unlock()
			c.Next()
		}
	}
	return func(c *gin.Context) { c.Next() }
}
