package grpclockfx

import (
	"go.uber.org/fx"
	"google.golang.org/grpc"

	"github.com/lockgate/lockgate/core"
	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
	"github.com/lockgate/lockgate/internal/fxgroup"
)

// Value group names used by Module.
const (
	// OptionsGroup holds grpclock.Option values applied by New, such as
	// grpclock.WithRule. Fill it with Options.
	OptionsGroup = "lockgate.grpc.options"
	// ServerOptionsGroup receives the interceptors as grpc.ServerOption
	// values; a server constructor takes them with
	// `group:"grpc.server_options"`.
	ServerOptionsGroup = "grpc.server_options"
	// Name is the fx name of the provided interceptor functions.
	Name = "lockgate"
)

// Module provides the results of New.
var Module = fx.Module("lockgate.grpc",
	fx.Provide(New),
)

// Options adds opts to the grpclock options of Module's interceptor (the
// OptionsGroup value group). The order between several Options calls is
// unspecified; WithRule for one method should be given once.
func Options(opts ...grpclock.Option) fx.Option {
	return fxgroup.Supply(OptionsGroup, opts)
}

// Params are the inputs of New.
type Params struct {
	fx.In

	// Locker is required (lockfx.Module provides one).
	Locker *core.Locker
	// Options are passed to grpclock.New.
	Options []grpclock.Option `group:"lockgate.grpc.options"`
}

// Result is what New provides.
type Result struct {
	fx.Out

	Interceptor *grpclock.Interceptor
	Unary       grpc.UnaryServerInterceptor  `name:"lockgate"`
	Stream      grpc.StreamServerInterceptor `name:"lockgate"`
	// ServerOptions are grpc.ChainUnaryInterceptor(Unary) and
	// grpc.ChainStreamInterceptor(Stream).
	ServerOptions []grpc.ServerOption `group:"grpc.server_options,flatten"`
}

// New builds the interceptor with grpclock.New. It needs no lifecycle: the
// interceptor owns nothing (the Locker is closed by whoever provided it).
// Errors: those of grpclock.New (a bad rule, naming the method).
func New(p Params) (Result, error) {
	lk, err := grpclock.New(p.Locker, p.Options...)
	if err != nil {
		return Result{}, err
	}
	return Result{
		Interceptor:   lk,
		Unary:         lk.Unary(),
		Stream:        lk.Stream(),
		ServerOptions: lk.ServerOptions(),
	}, nil
}
