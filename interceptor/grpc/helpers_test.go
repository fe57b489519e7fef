package grpclock_test

import (
	"context"
	"net"
	"path"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/lockgate/lockgate/core"
	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
	"github.com/lockgate/lockgate/internal/rpclock"
	"github.com/lockgate/lockgate/internal/rpcsuite"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb/testpbgrpc"
)

const (
	methodOrder  = testpbgrpc.Orders_Order_FullMethodName
	methodPlain  = testpbgrpc.Orders_Plain_FullMethodName
	methodUpload = testpbgrpc.Orders_Upload_FullMethodName
)

// orders serves the suite's test service with grpc-go: every handler is
// rpcsuite.Service's.
type orders struct {
	testpbgrpc.UnimplementedOrdersServer
	svc *rpcsuite.Service
}

// statusErr answers a Service error as grpc-go answers a handler's: a
// status as it is, a context error with its code.
func statusErr(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.FromContextError(err).Err()
}

func (o *orders) unary(ctx context.Context, name string, req *testpb.OrderRequest) (*testpb.OrderReply, error) {
	r, err := o.svc.Unary(ctx, name, req)
	return r, statusErr(err)
}

func (o *orders) Order(ctx context.Context, req *testpb.OrderRequest) (*testpb.OrderReply, error) {
	return o.unary(ctx, "Order", req)
}

func (o *orders) Quick(ctx context.Context, req *testpb.OrderRequest) (*testpb.OrderReply, error) {
	return o.unary(ctx, "Quick", req)
}

func (o *orders) Nested(ctx context.Context, req *testpb.OrderRequest) (*testpb.OrderReply, error) {
	return o.unary(ctx, "Nested", req)
}

func (o *orders) Relaxed(ctx context.Context, req *testpb.OrderRequest) (*testpb.OrderReply, error) {
	return o.unary(ctx, "Relaxed", req)
}

func (o *orders) Plain(ctx context.Context, req *testpb.OrderRequest) (*testpb.OrderReply, error) {
	return o.unary(ctx, "Plain", req)
}

func (o *orders) Watch(req *testpb.OrderRequest, st grpc.ServerStreamingServer[testpb.OrderReply]) error {
	return statusErr(o.svc.Watch(st.Context(), req, st.Send))
}

func (o *orders) Upload(st grpc.ClientStreamingServer[testpb.OrderRequest, testpb.OrderReply]) error {
	r, err := o.svc.Upload(st.Context(), st.Recv)
	if err != nil {
		return statusErr(err)
	}
	return st.SendAndClose(r)
}

func (o *orders) Chat(st grpc.BidiStreamingServer[testpb.OrderRequest, testpb.OrderReply]) error {
	return statusErr(o.svc.Echo(st.Context(), "Chat", st.Recv, st.Send))
}

func (o *orders) Feed(st grpc.BidiStreamingServer[testpb.OrderRequest, testpb.OrderReply]) error {
	return statusErr(o.svc.Echo(st.Context(), "Feed", st.Recv, st.Send))
}

// outermost is the stack's outermost unary interceptor (rpcsuite.Stack):
// a call with the metadata rpcsuite.ServerTimeoutHeader runs under that
// server-side deadline; a panic of the chain is recovered into Internal;
// served (if not nil) is told what the rest of the chain answered.
func outermost(served func(string, rpcsuite.Code)) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		if vs := metadata.ValueFromIncomingContext(ctx, rpcsuite.ServerTimeoutHeader); len(vs) > 0 {
			d, err := time.ParseDuration(vs[0])
			if err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "%s: %v", rpcsuite.ServerTimeoutHeader, err)
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		defer func() {
			if p := recover(); p != nil {
				resp, err = nil, status.Errorf(codes.Internal, "panic: %v", p)
			}
			if served != nil {
				served(path.Base(info.FullMethod), rpcsuite.Code(status.Code(err)))
			}
		}()
		return handler(ctx, req)
	}
}

// suiteOptions are grpclock's constructors of the options a suite's
// Server asks for (rpcsuite.Options.For).
var suiteOptions = rpcsuite.Options[grpclock.Option]{
	WithRule: func(fullMethod string, r rpclock.Rule) grpclock.Option {
		return grpclock.WithRule(fullMethod, grpclock.Rule(r))
	},
	WithLockOptions:    grpclock.WithLockOptions,
	WithReleaseTimeout: grpclock.WithReleaseTimeout,
	WithLogger:         grpclock.WithLogger,
}

// grpcStack is the suite's gRPC stack: the test service on grpc-go over
// loopback TCP, behind grpclock's interceptors. Its answers carry no HTTP
// Retry-After (RetryInfo only), and its client is no rpcsuite.RawClient:
// grpc-go decodes a request before any interceptor runs and answers one
// that does not decode itself (Internal, "grpc: failed to unmarshal the
// received message: proto: ...").
var grpcStack = rpcsuite.Stack{Name: "grpc", Serve: serveSuite, Build: buildSuite, RetryAfterIn: rpcsuite.Nowhere}

// buildSuite is the stack's rpcsuite.Stack.Build: grpclock.New's error.
func buildSuite(l *core.Locker, s rpcsuite.Server) error {
	_, err := grpclock.New(l, suiteOptions.For(s)...)
	return err
}

func serveSuite(t testing.TB, s rpcsuite.Server) rpcsuite.Client {
	t.Helper()
	opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(outermost(s.Served))}
	if s.Locker != nil {
		lk, err := grpclock.New(s.Locker, suiteOptions.For(s)...)
		if err != nil {
			t.Fatalf("grpclock.New: %v", err)
		}
		opts = append(opts, lk.ServerOptions()...)
	}
	return suiteClient{serve(t, s.Service, opts...)}
}

// suiteClient is the suite's client over a gRPC connection.
type suiteClient struct{ conn *grpc.ClientConn }

func (c suiteClient) Call(ctx context.Context, method string, req *testpb.OrderRequest, md ...string) rpcsuite.Reply {
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	out := &testpb.OrderReply{}
	err := c.conn.Invoke(ctx, rpcsuite.FullMethod(method), req, out)
	if err == nil {
		return rpcsuite.Reply{Code: rpcsuite.OK, Msg: out}
	}
	return replyOf(err)
}

// replyOf is what the suite reads of a call's error: its status.
func replyOf(err error) rpcsuite.Reply {
	st := status.Convert(err)
	r := rpcsuite.Reply{Code: rpcsuite.Code(st.Code()), Message: st.Message(), Err: err}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			r.RetryInfo, r.RetryDelay = true, ri.GetRetryDelay().AsDuration()
		}
	}
	return r
}

// serve serves svc on 127.0.0.1:0 with opts and returns a client
// connection; both stop at t's cleanup, after svc's held handlers are
// released.
func serve(t testing.TB, svc *rpcsuite.Service, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	gs := grpc.NewServer(opts...)
	testpbgrpc.RegisterOrdersServer(gs, &orders{svc: svc})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		svc.Release()
		gs.Stop()
		<-served
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// env is one grpclock-specific test's world: its rpcsuite.Env (a real
// Redis, a Locker with the test's own prefix, the suite's service) served
// on a real gRPC server, and a client.
type env struct {
	*rpcsuite.Env
	client testpbgrpc.OrdersClient
}

// newEnv serves the test service behind the interceptor built with opts.
func newEnv(t testing.TB, opts ...grpclock.Option) *env {
	t.Helper()
	e := newBase(t)
	lk, err := grpclock.New(e.Locker, opts...)
	if err != nil {
		t.Fatalf("grpclock.New: %v", err)
	}
	e.serve(t, lk.ServerOptions()...)
	return e
}

// newControl serves the test service without the interceptor.
func newControl(t testing.TB) *env {
	t.Helper()
	e := newBase(t)
	e.serve(t)
	return e
}

// newBase starts Redis and a Locker on it with the test's own prefix and
// opts (after the prefix).
func newBase(t testing.TB, opts ...core.Option) *env {
	t.Helper()
	return &env{Env: rpcsuite.NewEnv(t, "grpclock", opts...)}
}

func (e *env) serve(t testing.TB, opts ...grpc.ServerOption) {
	t.Helper()
	e.client = testpbgrpc.NewOrdersClient(serve(t, e.Service, opts...))
}
