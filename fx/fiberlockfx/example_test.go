package fiberlockfx_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/fx/fiberlockfx"
	fiberlock "github.com/lockgate/lockgate/middleware/fiber"
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

// Example adds one-line lock middleware to a Fiber route of an fx
// application. (Nothing is locked here, so the example needs no running
// Redis.)
func Example() {
	client := newClient()
	defer client.Close()
	app := fx.New(
		fx.NopLogger,
		fx.Supply(fx.Annotate(client, fx.As(new(redis.UniversalClient)))),
		fx.Provide(provideLocker),
		fx.Supply(&fiberlockfx.Defaults{Wait: 500 * time.Millisecond}), // optional defaults of every route
		fiberlockfx.Module,
		fx.Invoke(func(f *fiberlockfx.Factory) {
			web := fiber.New(fiber.Config{DisableStartupMessage: true})
			web.Post("/voucher-order/seckill/:voucher", f.Key("order:{query.user_id:int}:{path.voucher:uint}"), func(c *fiber.Ctx) error {
				return c.JSON(fiber.Map{"fence": fiberlock.FromContext(c).Fence()})
			})
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

// Example_badDefaults: bad Defaults fail the application's start, before
// any route or request.
func Example_badDefaults() {
	client := newClient()
	defer client.Close()
	app := fx.New(
		fx.NopLogger,
		fx.Supply(fx.Annotate(client, fx.As(new(redis.UniversalClient)))),
		fx.Provide(provideLocker),
		fx.Supply(&fiberlockfx.Defaults{FailOpen: true, TTL: time.Millisecond}),
		fiberlockfx.Module,
		fx.Invoke(func(*fiberlockfx.Factory) {}),
	)
	err := app.Start(context.Background())
	fmt.Println(err != nil, errors.Is(err, core.ErrInvalid))
	// Output: true true
}

// ExampleOptions: two modules each add a piece of the defaults of every
// route (the OptionsGroup); a field set by both would fail the start.
func ExampleOptions() {
	client := newClient()
	defer client.Close()
	logging := fx.Module("logging", fiberlockfx.Options(fiberlockfx.Defaults{Logger: slog.Default()}))
	waiting := fx.Module("waiting", fiberlockfx.Options(fiberlockfx.Defaults{Wait: 500 * time.Millisecond}))
	app := fx.New(
		fx.NopLogger,
		fx.Supply(fx.Annotate(client, fx.As(new(redis.UniversalClient)))),
		fx.Provide(provideLocker),
		logging,
		waiting,
		fiberlockfx.Module,
		fx.Invoke(func(f *fiberlockfx.Factory) {
			web := fiber.New(fiber.Config{DisableStartupMessage: true})
			web.Post("/order/:voucher", f.Key("order:{query.user_id:int}:{path.voucher:uint}"), func(c *fiber.Ctx) error {
				return c.SendStatus(fiber.StatusOK)
			})
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
