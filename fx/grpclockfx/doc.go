// Package grpclockfx wires the gRPC lock interceptors of package grpclock
// into an fx application. Module builds a *grpclock.Interceptor from the
// *core.Locker in the graph (see package lockfx) and the grpclock options of
// the OptionsGroup group, and provides it three ways, so that users chain it
// with their own interceptors:
//
//   - *grpclock.Interceptor, to place Unary() and Stream() exactly where
//     they belong in an explicit chain (after authentication);
//   - grpc.UnaryServerInterceptor and grpc.StreamServerInterceptor named
//     "lockgate" (`name:"lockgate"`);
//   - two grpc.ServerOption values (ChainUnaryInterceptor and
//     ChainStreamInterceptor) in the value group ServerOptionsGroup
//     ("grpc.server_options"), for a server built from that group. fx does
//     not order a value group: when the lock must run after another
//     interceptor, use one of the first two forms.
//
// A bad lock rule or option (given through Options or as an annotation)
// fails the application at construction with grpclock.New's error naming
// the method and the field, also when the rule is fail-open: a mistake in a
// rule never turns into calls that fail, or run without the lock, at run
// time.
package grpclockfx
