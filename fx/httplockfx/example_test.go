package httplockfx_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/lockgate/lockgate/fx/httplockfx"
	"github.com/lockgate/lockgate/fx/lockfx"
	httplock "github.com/lockgate/lockgate/middleware/nethttp"
)

// Example adds one-line lock middleware to a route of an fx application.
// (Nothing is locked here, so the example needs no running Redis.)
func Example() {
	app := fx.New(
		fx.NopLogger,
		fx.Provide(func(lc fx.Lifecycle) redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6390"})
			lc.Append(fx.StopHook(c.Close))
			return c
		}),
		lockfx.Module,
		httplockfx.Options(httplock.WithFailOpen()), // defaults of every route
		httplockfx.Module,
		fx.Invoke(func(f *httplockfx.Factory) {
			mux := http.NewServeMux()
			order := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintln(w, "fence", httplock.FromContext(r.Context()).Fence())
			})
			mux.Handle("POST /voucher-order/seckill/{voucher}", f.Must("order:{query.user_id}:{path.voucher}")(order))
			fmt.Println("route ready")
		}),
	)
	ctx := context.Background()
	if err := app.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_ = app.Stop(ctx)
	// Output: route ready
}
