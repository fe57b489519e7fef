package grpclockfx_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	"google.golang.org/grpc"

	"github.com/lockgate/lockgate/fx/grpclockfx"
	"github.com/lockgate/lockgate/fx/lockfx"
	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
)

// Example wires the lock interceptors into a server built from the
// "grpc.server_options" value group, with a Go-side rule. (Nothing is
// locked here, so the example needs no running Redis.)
func Example() {
	app := fx.New(
		fx.NopLogger,
		fx.Provide(func(lc fx.Lifecycle) redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6390"})
			lc.Append(fx.StopHook(c.Close))
			return c
		}),
		fx.Supply(&lockfx.Config{StartWarnOnly: true}), // no Redis here: the start check only warns
		lockfx.Module,
		grpclockfx.Options(grpclock.WithRule("/grpc.health.v1.Health/Check", grpclock.Rule{Key: "health:{service}"})),
		grpclockfx.Module,
		fx.Provide(func(p struct {
			fx.In
			Opts []grpc.ServerOption `group:"grpc.server_options"`
		}) *grpc.Server {
			return grpc.NewServer(p.Opts...)
		}),
		fx.Invoke(func(s *grpc.Server, lk *grpclock.Interceptor) {
			fmt.Println("locked:", lk.Methods())
		}),
	)
	ctx := context.Background()
	if err := app.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_ = app.Stop(ctx)
	// Output: locked: [/grpc.health.v1.Health/Check]
}
