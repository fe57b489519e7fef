package fiberlockfx_test

import (
	"context"
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/lockgate/lockgate/fx/fiberlockfx"
	"github.com/lockgate/lockgate/fx/lockfx"
	fiberlock "github.com/lockgate/lockgate/middleware/fiber"
)

// Example adds one-line lock middleware to a Fiber route of an fx
// application. (Nothing is locked here, so the example needs no running
// Redis.)
func Example() {
	app := fx.New(
		fx.NopLogger,
		fx.Provide(func(lc fx.Lifecycle) redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6390"})
			lc.Append(fx.StopHook(c.Close))
			return c
		}),
		lockfx.Module,
		fx.Supply(&fiberlockfx.Defaults{FailOpen: false}), // optional defaults of every route
		fiberlockfx.Module,
		fx.Invoke(func(f *fiberlockfx.Factory) {
			web := fiber.New(fiber.Config{DisableStartupMessage: true})
			web.Post("/voucher-order/seckill/:voucher", f.Key("order:{query.user_id}:{path.voucher}"), func(c *fiber.Ctx) error {
				return c.JSON(fiber.Map{"fence": fiberlock.Lease(c).Fence()})
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
