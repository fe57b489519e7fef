// Package rpclock is the part of the RPC lock interceptors that does not
// depend on the RPC framework, shared by grpclock (interceptor/grpc) and
// connectlock (interceptor/connect) so that one (lockgate.v1.lock)
// annotation or Go rule means the same under both:
//
//   - storing and checking the values of their Options (Options, whose
//     methods each exported Option wraps) and the start of their New
//     (NewBase: the Locker and the options checked, the rules loaded, the
//     Gate set up), every error prefixed with the interceptor's name;
//   - reading the annotations of a registry's services and compiling them,
//     with the Go rules over them, into one *Method per locked method, every
//     rule checked at start-up (Load, Compile);
//   - building a call's lock name from its request message, its metadata
//     (gRPC metadata, or the request headers of a Connect call) and context
//     values (Key.Build);
//   - taking the lock and deciding what a failure means (Gate.Acquire,
//     Failure), including when a fail-open rule may run without the lock,
//     and releasing it (Gate.Release), with the logs of both.
//
// What a Failure becomes on the wire (a gRPC status, a *connect.Error) is
// each interceptor's own. This package imports neither grpc-go nor Connect.
package rpclock
