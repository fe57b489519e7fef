package lockfx_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/fx/lockfx"
)

// Example builds an application whose *core.Locker comes from lockfx.Module.
// The Redis client is the application's own: the module closes the Locker
// on stop, never the client. (Nothing is locked here, so the example needs
// no running Redis.)
func Example() {
	app := fx.New(
		fx.NopLogger,
		fx.Provide(func(lc fx.Lifecycle) redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0"})
			lc.Append(fx.StopHook(c.Close)) // the application closes what it built
			return c
		}),
		// This example has no Redis: its start check only warns. A real
		// application leaves the check on, so that it does not start
		// without its lock service.
		fx.Supply(&lockfx.Config{Prefix: "shop:", TTL: 10 * time.Second, StartWarnOnly: true}),
		lockfx.Options(core.WithReleaseTimeout(500*time.Millisecond)),
		lockfx.Module,
		fx.Invoke(func(l *core.Locker) { fmt.Println("locker ready:", l != nil) }),
	)
	ctx := context.Background()
	if err := app.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if err := app.Stop(ctx); err != nil {
		fmt.Println(err)
	}
	// Output: locker ready: true
}
