package seckill

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

// NewChiHandler is NewHTTPHandler on a chi v5 router (serve -http chi):
// the same routes, checks and outcomes. chi routes take net/http
// middleware, so the lock is httplock itself (lock_redis.go), given to the
// route's With — which runs once the route is matched, when {voucher_id}
// exists; given to a group's Use it would run before and answer 400 to
// every order (see middleware/chi's doc). chi v5.5 and later set the
// request's path values, so the checks and the key read {voucher_id}
// with r.PathValue, as on ServeMux; chi hands a percent-encoded segment on
// undecoded ("%31" is not a voucher id here, it is on ServeMux). Serve it
// with NewStackServer. Errors: as NewFiberApp.
func NewChiHandler(cfg Config) (http.Handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := chi.NewRouter()
	// A panicking handler is answered 500, its lock released.
	r.Use(middleware.Recoverer)
	r.Get("/healthz", healthz)
	if cfg.Metrics != nil {
		r.Method(http.MethodGet, "/metrics", cfg.Metrics)
	}
	r.Get("/vouchers/{voucher_id}", cfg.httpVoucher)
	const orderRoute = "/voucher-order/seckill/{voucher_id}"
	trace := func(next http.Handler) http.Handler { return cfg.httpTrace(http.MethodPost, orderRoute, next) }
	r.With(trace, cfg.httpValidate, cfg.httpLock).Post(orderRoute, cfg.httpOrder)
	return httpFraming(r), nil
}
