package grpclock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/lockgate/lockgate/core"
)

// Interceptor holds the compiled lock rules of every locked method and
// hands out the unary and stream server interceptors that apply them. It is
// immutable after New and safe for concurrent use.
type Interceptor struct {
	locker         *core.Locker
	methods        map[string]*method
	logger         *slog.Logger
	releaseTimeout time.Duration
}

// New reads the (lockgate.v1.lock) annotations of every service registered
// in protoregistry.GlobalFiles (or WithFiles), applies the Go rules of
// WithRule over them, and checks every rule against its method. Call it
// once, at start-up, after the generated packages of the services are
// linked in (their init registers the descriptors).
//
// Errors: a nil locker, or one error per bad rule, joined, each naming the
// full method and whether it is an annotation or a Go rule (see the package
// doc for what is checked).
func New(locker *core.Locker, opts ...Option) (*Interceptor, error) {
	if locker == nil {
		return nil, errors.New("grpclock: nil *core.Locker")
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	methods, err := loadRules(&o)
	if err != nil {
		return nil, err
	}
	return &Interceptor{
		locker:         locker,
		methods:        methods,
		logger:         o.logger,
		releaseTimeout: o.releaseTimeout,
	}, nil
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
		if m.input != nil {
			// Server streaming: the key reads the request, which the
			// handler has not received yet. Receive it here and hand it
			// to the handler's first RecvMsg.
			first = m.input.New().Interface()
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
func (i *Interceptor) acquire(ctx context.Context, m *method, msg protoreflect.Message) (*core.Lease, error) {
	key, err := m.key.build(ctx, msg)
	if err != nil {
		return nil, keyStatus(m, err)
	}
	lease, err := i.locker.Lock(ctx, key, m.opts...)
	if err == nil {
		return lease, nil
	}
	if m.failOpen && errors.Is(err, core.ErrUnavailable) {
		i.logger.WarnContext(ctx, "grpclock: redis unavailable, running without the lock (fail-open)",
			"method", m.name, "key", key, "error", err)
		return nil, nil
	}
	return nil, i.lockStatus(ctx, m, err)
}

// release unlocks after the handler, even when the call's context is
// cancelled, within the release timeout.
func (i *Interceptor) release(ctx context.Context, m *method, lease *core.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), i.releaseTimeout)
	defer cancel()
	if err := lease.Unlock(rctx); err != nil {
		i.logger.WarnContext(ctx, "grpclock: release failed (the lock expires after its TTL)",
			"method", m.name, "key", lease.Key(), "error", err)
	}
}
