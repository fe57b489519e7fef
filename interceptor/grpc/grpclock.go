package grpclock

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/rpclock"
)

// Interceptor holds the compiled lock rules of every locked method and
// hands out the unary and stream server interceptors that apply them. It is
// immutable after New and safe for concurrent use.
type Interceptor struct {
	gate    rpclock.Gate
	methods map[string]*rpclock.Method
}

// New reads the (lockgate.v1.lock) annotations of every service registered
// in protoregistry.GlobalFiles (or WithFiles), applies the Go rules of
// WithRule over them, and checks every rule against its method. Call it
// once, at start-up, after the generated packages of the services are
// linked in (their init registers the descriptors).
//
// Every rule is checked here, whether fail-open or not: a bad rule or
// option is a setup error, never a failure (or an unlocked run) of every
// call.
//
// Errors, joined, each naming what is at fault: a nil locker; a nil Option;
// a bad option value (WithFiles(nil), WithReleaseTimeout(d <= 0), an
// invalid or nil core option in WithLockOptions, reported with core's
// error, which matches core.ErrInvalid); and one error per bad rule, naming
// the full method, whether it is an annotation or a Go rule, and the field
// (see the package doc for what is checked).
func New(locker *core.Locker, opts ...Option) (*Interceptor, error) {
	b, err := rpclock.NewBase("grpclock", locker, opts)
	if err != nil {
		return nil, err
	}
	return &Interceptor{gate: b.Gate, methods: b.Methods}, nil
}

// Methods returns the full names of the locked methods, for logs and tests.
func (i *Interceptor) Methods() []string {
	names := make([]string, 0, len(i.methods))
	for n := range i.methods {
		names = append(names, n)
	}
	return names
}

// Unary returns the unary server interceptor. Chain it with
// grpc.ChainUnaryInterceptor, after authentication.
func (i *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		m := i.methods[info.FullMethod]
		if m == nil {
			return handler(ctx, req)
		}
		var msg protoreflect.Message
		if pm, ok := req.(proto.Message); ok {
			msg = pm.ProtoReflect()
		}
		lease, err := i.acquire(ctx, m, msg)
		if err != nil {
			return nil, err
		}
		if lease == nil { // fail-open
			return handler(ctx, req)
		}
		defer i.release(ctx, m, lease)
		return handler(lease.Context(), req)
	}
}

// Stream returns the stream server interceptor. Chain it with
// grpc.ChainStreamInterceptor, after authentication.
func (i *Interceptor) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		m := i.methods[info.FullMethod]
		if m == nil {
			return handler(srv, ss)
		}
		ctx := ss.Context()
		var first proto.Message
		var msg protoreflect.Message
		if m.Input != nil {
			// Server streaming: the key reads the request, which the
			// handler has not received yet. Receive it here and hand it
			// to the handler's first RecvMsg.
			first = m.Input.New().Interface()
			if err := ss.RecvMsg(first); err != nil {
				return err
			}
			msg = first.ProtoReflect()
		}
		lease, err := i.acquire(ctx, m, msg)
		if err != nil {
			return err
		}
		ws := &stream{ServerStream: ss, ctx: ctx, first: first}
		if lease == nil { // fail-open
			return handler(srv, ws)
		}
		defer i.release(ctx, m, lease)
		ws.ctx = lease.Context()
		return handler(srv, ws)
	}
}

// ServerOptions returns grpc.ChainUnaryInterceptor(i.Unary()) and
// grpc.ChainStreamInterceptor(i.Stream()), for grpc.NewServer. Options of
// several Chain calls add up in the order given to grpc.NewServer.
func (i *Interceptor) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(i.Unary()),
		grpc.ChainStreamInterceptor(i.Stream()),
	}
}

// acquire builds the key and takes the lock. It returns (nil, nil) when
// the rule is fail-open and Redis is unavailable, and a status error for
// every failure.
func (i *Interceptor) acquire(ctx context.Context, m *rpclock.Method, msg protoreflect.Message) (*core.Lease, error) {
	lease, f := i.gate.Acquire(ctx, m, msg, incomingMD(ctx))
	if f != nil {
		return nil, failureStatus(f)
	}
	return lease, nil
}

// incomingMD reads {md.name} from the call's incoming metadata: the first
// value of the lower-cased key.
func incomingMD(ctx context.Context) rpclock.Metadata {
	return func(name string) (string, bool, error) {
		vs := metadata.ValueFromIncomingContext(ctx, strings.ToLower(name))
		if len(vs) == 0 {
			return "", false, nil
		}
		return vs[0], true, nil
	}
}

// release unlocks after the handler (see rpclock.Gate.Release: detached
// from the call's cancellation, bounded by the release timeout, failures
// logged).
func (i *Interceptor) release(ctx context.Context, m *rpclock.Method, lease *core.Lease) {
	i.gate.Release(ctx, m, lease)
}
