package grpclockfx

import (
	"go.uber.org/fx"
	"google.golang.org/grpc"

	"github.com/lockgate/lockgate/core"
	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
)

// Value group names used by Module.
const (
	// OptionsGroup holds the grpclock options applied by New, such as
	// grpclock.WithRule: each value is the []grpclock.Option of one Options
	// call. Fill it with Options.
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
// OptionsGroup value group). They apply in the order given within one
// call; the order between several Options calls is unspecified (fx does not
// order a value group), so give options that override each other (two
// WithRule for one method, WithReleaseTimeout and a WithLockOptions
// release timeout) in one call. Every rule and option is checked by
// grpclock.New when the graph is built: a bad one fails the application's
// start, fail-open or not.
func Options(opts ...grpclock.Option) fx.Option {
	return fx.Supply(fx.Annotate(append([]grpclock.Option(nil), opts...), fx.ResultTags(`group:"`+OptionsGroup+`"`)))
}

// Params are the inputs of New.
type Params struct {
	fx.In

	// Locker is required (lockfx.Module provides one).
	Locker *core.Locker
	// Options are passed to grpclock.New: one []grpclock.Option per
	// Options call.
	Options [][]grpclock.Option `group:"lockgate.grpc.options"`
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
// interceptor owns nothing (the Locker is shut down by whoever provided it;
// lockfx does on stop).
// Errors: those of grpclock.New (a bad rule or option, fail-open or not,
// naming the method and the field), which fail the application's start.
func New(p Params) (Result, error) {
	var opts []grpclock.Option
	for _, group := range p.Options {
		opts = append(opts, group...)
	}
	lk, err := grpclock.New(p.Locker, opts...)
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
