package grpclockfx_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/fx/grpclockfx"
	"github.com/lockgate/lockgate/fx/lockfx"
	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
	"github.com/lockgate/lockgate/redistest"
)

const checkMethod = "/grpc.health.v1.Health/Check"

// health answers SERVING when Check runs under a lease, NOT_SERVING
// otherwise, so a client sees whether the lock was taken.
type health struct {
	grpc_health_v1.UnimplementedHealthServer
}

func (health) Check(ctx context.Context, _ *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	st := grpc_health_v1.HealthCheckResponse_NOT_SERVING
	if l := grpclock.FromContext(ctx); l != nil && l.Key() == "health:orders" {
		st = grpc_health_v1.HealthCheckResponse_SERVING
	}
	return &grpc_health_v1.HealthCheckResponse{Status: st}, nil
}

// server is a gRPC server on 127.0.0.1:0 run by the fx lifecycle.
type server struct {
	addr string
}

// newServer builds the server from the ServerOptionsGroup group, as an
// application would.
func newServer(lc fx.Lifecycle, p struct {
	fx.In
	Opts []grpc.ServerOption `group:"grpc.server_options"`
}) *server {
	return startServer(lc, p.Opts...)
}

func startServer(lc fx.Lifecycle, opts ...grpc.ServerOption) *server {
	s := &server{}
	gs := grpc.NewServer(opts...)
	grpc_health_v1.RegisterHealthServer(gs, health{})
	served := make(chan struct{})
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			s.addr = lis.Addr().String()
			go func() {
				defer close(served)
				_ = gs.Serve(lis)
			}()
			return nil
		},
		OnStop: func(context.Context) error {
			gs.Stop()
			<-served
			return nil
		},
	})
	return s
}

func universal(c redis.UniversalClient) fx.Option {
	return fx.Supply(fx.Annotate(c, fx.As(new(redis.UniversalClient))))
}

func check(t *testing.T, addr string) grpc_health_v1.HealthCheckResponse_ServingStatus {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "orders"})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return r.GetStatus()
}

// TestModuleServerOptions: start an application whose server takes the
// interceptors from the value group, make a call through the locked
// method, stop; the Locker is closed, nothing leaks (TestMain).
func TestModuleServerOptions(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	var s *server
	var l *core.Locker
	app := fxtest.New(t,
		universal(client),
		lockfx.Module,
		grpclockfx.Options(grpclock.WithRule(checkMethod, grpclock.Rule{Key: "health:{service}"})),
		grpclockfx.Module,
		fx.Provide(newServer),
		fx.Populate(&s, &l),
	)
	app.RequireStart()
	if got := check(t, s.addr); got != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("Check ran with status %v: the handler did not see the lease health:orders", got)
	}
	app.RequireStop()
	if _, err := l.Lock(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Lock after stop: %v, want ErrClosed", err)
	}
}

// TestModuleNamedInterceptors: the named interceptor functions placed in
// an explicit chain work the same.
func TestModuleNamedInterceptors(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	var s *server
	app := fxtest.New(t,
		universal(client),
		lockfx.Module,
		grpclockfx.Options(grpclock.WithRule(checkMethod, grpclock.Rule{Key: "health:{service}"})),
		grpclockfx.Module,
		fx.Provide(func(lc fx.Lifecycle, p struct {
			fx.In
			Unary  grpc.UnaryServerInterceptor  `name:"lockgate"`
			Stream grpc.StreamServerInterceptor `name:"lockgate"`
		}) *server {
			return startServer(lc, grpc.ChainUnaryInterceptor(p.Unary), grpc.ChainStreamInterceptor(p.Stream))
		}),
		fx.Populate(&s),
	)
	app.RequireStart()
	defer app.RequireStop()
	if got := check(t, s.addr); got != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("Check ran with status %v: the handler did not see the lease", got)
	}
}

// TestModuleControl: without a rule the same server answers NOT_SERVING,
// so the SERVING above really comes from the lock.
func TestModuleControl(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	var s *server
	app := fxtest.New(t, universal(client), lockfx.Module, grpclockfx.Module, fx.Provide(newServer), fx.Populate(&s))
	app.RequireStart()
	defer app.RequireStop()
	if got := check(t, s.addr); got != grpc_health_v1.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("control: status %v without a rule, want NOT_SERVING", got)
	}
}

// TestModuleBadRule: a bad rule or option given through Options fails the
// application's start with grpclock.New's error naming the method and the
// field, although every rule here is fail-open. The Locker comes from
// lockfx.Module: core.New starts nothing, so an application that fails to
// build leaks nothing (TestMain's goleak). Control: the same rule without
// the fault starts and serves Check under the lock.
func TestModuleBadRule(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	good := grpclock.Rule{Key: "health:{service}", FailOpen: true}
	with := func(f func(*grpclock.Rule)) grpclock.Option {
		r := good
		f(&r)
		return grpclock.WithRule(checkMethod, r)
	}
	for _, tc := range []struct {
		name string
		opts []grpclock.Option
		want []string
	}{
		{"unknown field", []grpclock.Option{with(func(r *grpclock.Rule) { r.Key = "health:{nope}" })}, []string{checkMethod, "nope"}},
		{"unknown placeholder type", []grpclock.Option{with(func(r *grpclock.Rule) { r.Key = "health:{service:float}" })}, []string{checkMethod, "float"}},
		{"negative wait", []grpclock.Option{with(func(r *grpclock.Rule) { r.Wait = -time.Second })}, []string{checkMethod, "Rule.Wait"}},
		{"short ttl", []grpclock.Option{with(func(r *grpclock.Rule) { r.TTL = time.Millisecond })}, []string{checkMethod, "Rule.TTL"}},
		{"bad core option", []grpclock.Option{with(func(r *grpclock.Rule) { r.Options = []core.LockOption{core.WithTTL(time.Millisecond)} })},
			[]string{checkMethod, "Rule.Options[0]", "ttl"}},
		{"zero release timeout", []grpclock.Option{grpclock.WithRule(checkMethod, good), grpclock.WithReleaseTimeout(0)}, []string{"WithReleaseTimeout"}},
		{"bad lock option", []grpclock.Option{grpclock.WithRule(checkMethod, good), grpclock.WithLockOptions(core.WithWait(-2 * time.Second))},
			[]string{"WithLockOptions", "wait"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := fx.New(fx.NopLogger,
				universal(client),
				lockfx.Module,
				grpclockfx.Options(tc.opts...),
				grpclockfx.Module,
				fx.Invoke(func(*grpclock.Interceptor) {}),
			)
			err := app.Err()
			if err == nil {
				t.Fatal("app built, want an error")
			}
			t.Logf("%v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("app.Err() = %q; want it to contain %q", err, w)
				}
			}
			if err := app.Start(context.Background()); err == nil {
				t.Fatal("app started, want an error")
			}
		})
	}
	t.Run("control", func(t *testing.T) {
		var s *server
		app := fxtest.New(t,
			universal(client),
			lockfx.Module,
			grpclockfx.Options(grpclock.WithRule(checkMethod, good), grpclock.WithReleaseTimeout(time.Second),
				grpclock.WithLockOptions(core.WithWait(core.NoWait))),
			grpclockfx.Module,
			fx.Provide(newServer),
			fx.Populate(&s),
		)
		app.RequireStart()
		defer app.RequireStop()
		if got := check(t, s.addr); got != grpc_health_v1.HealthCheckResponse_SERVING {
			t.Fatalf("control: Check ran with status %v; want SERVING (under the lease health:orders)", got)
		}
	})
}
