package httplockfx_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/fx/httplockfx"
	httplock "github.com/lockgate/lockgate/middleware/nethttp"
)

// provideLocker stands for lockfx.Module, which provides the *core.Locker
// of a real application (and shuts it down on stop).
func provideLocker(lc fx.Lifecycle, c redis.UniversalClient) (*core.Locker, error) {
	l, err := core.New(c)
	if err != nil {
		return nil, err
	}
	lc.Append(fx.StopHook(l.Shutdown))
	return l, nil
}

// newClient is the application's Redis client (closed by the caller).
func newClient() redis.UniversalClient {
	return redis.NewClient(&redis.Options{Addr: "127.0.0.1:6390"})
}

// Example adds one-line lock middleware to a route of an fx application.
// (Nothing is locked here, so the example needs no running Redis.)
func Example() {
	client := newClient()
	defer client.Close()
	app := fx.New(
		fx.NopLogger,
		fx.Supply(fx.Annotate(client, fx.As(new(redis.UniversalClient)))),
		fx.Provide(provideLocker),
		httplockfx.Options(httplock.WithWait(500*time.Millisecond)), // defaults of every route
		httplockfx.Module,
		fx.Invoke(func(f *httplockfx.Factory) {
			mux := http.NewServeMux()
			order := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintln(w, "fence", httplock.FromContext(r.Context()).Fence())
			})
			mux.Handle("POST /voucher-order/seckill/{voucher}", f.Must("order:{query.user_id:int}:{path.voucher:uint}")(order))
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

// Example_badDefault: a bad module-wide option fails the application's
// start, before any route or request.
func Example_badDefault() {
	client := newClient()
	defer client.Close()
	app := fx.New(
		fx.NopLogger,
		fx.Supply(fx.Annotate(client, fx.As(new(redis.UniversalClient)))),
		fx.Provide(provideLocker),
		httplockfx.Options(httplock.WithFailOpen(), httplock.WithTTL(time.Millisecond)),
		httplockfx.Module,
		fx.Invoke(func(*httplockfx.Factory) {}),
	)
	err := app.Start(context.Background())
	fmt.Println(err != nil, errors.Is(err, core.ErrInvalid))
	// Output: true true
}
