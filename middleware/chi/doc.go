// Package chilock says how to lock chi routes with lockgate; it holds no
// code. chi routes take net/http middleware, and httplock (import
// "github.com/lockgate/lockgate/middleware/nethttp") is that middleware:
//
//	lock := httplock.Must(httplock.New(locker, "order:{query.user_id}:{path.voucher}"))
//	r := chi.NewRouter()
//	r.Use(middleware.Recoverer)
//	r.With(lock).Post("/seckill/{voucher}", h)
//	r.With(httplock.Must(httplock.New(locker, "export:{path.tenant}", httplock.WithLimit(3)))).Post("/{tenant}/exports", export) // 3 at once per tenant
//	r.With(httplock.Must(httplock.New(locker, "voucher:{path.id}", httplock.WithShared()))).Get("/vouchers/{id}", show) // readers together, an exclusive route of the key alone
//
// chi v5.5 and later set the request's path values (r.PathValue) when they
// match a route, so httplock reads {path.voucher} as it does on
// http.ServeMux, without WithPathValue. The handler's r.Context() is the
// lease's context (httplock.FromContext returns the lease), and every
// answer is httplock's: 400, 413, 429 with Retry-After, 503 (see package
// httplock). Put middleware.Recoverer in front (r.Use): a panicking handler
// has its lock released and is answered 500.
//
// # Lock with With, not Use
//
// Middleware given to With runs when the route has been matched and its
// parameters exist; middleware given to Use runs before the router of its
// group matches anything. So the common
//
//	r.Route("/seckill", func(g chi.Router) {
//		g.Use(lock) // runs before "/{voucher}" is matched
//		g.Post("/{voucher}", h)
//	})
//
// answers every request 500 {"error":"internal server error"} (the
// server's mistake: an error line, once, names the template and the route
// chi matched so far, "/seckill/*") and never runs h; WithPathValue(chi.URLParam) does not help, since
// chi has not set the parameter either. In a group, write
// g.With(lock).Post("/{voucher}", h). Use works when the group's own
// pattern holds the parameter (r.Route("/seckill/{voucher}", ...) with
// g.Use(lock) and g.Post("/", h)), and for keys that read no path
// parameter ({query.*}, {header.*}, {body.*}, {form.*}, {ctx.*}).
//
// # Percent-encoded parameters
//
// When a client percent-encodes a path in a way Go's URL parser keeps
// (a character that needs no encoding: /seckill/%37, /seckill/a%3Ab), chi
// matches the raw path and hands the parameter on undecoded: chi.URLParam
// and r.PathValue give "%37", where http.ServeMux gives "7". httplock locks
// the value as chi hands it, which is what chi's handlers see: a handler
// that parses "%37" as a number rejects it, so /seckill/%37 and
// /seckill/7 never reach the same voucher. A handler that decodes its
// parameters (url.PathUnescape) must have the key decoded too, or the two
// paths take two locks for one voucher:
//
//	decoded := httplock.WithPathValue(func(r *http.Request, name string) string {
//		v, err := url.PathUnescape(chi.URLParam(r, name))
//		if err != nil {
//			return "" // a 400 naming the parameter
//		}
//		return v
//	})
//	lock := httplock.Must(httplock.New(locker, "order:{query.user_id}:{path.voucher}", decoded))
package chilock
