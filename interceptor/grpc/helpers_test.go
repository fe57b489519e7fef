package grpclock_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/lockgate/lockgate/core"
	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
	"github.com/lockgate/lockgate/interceptor/grpc/internal/testpb"
	"github.com/lockgate/lockgate/redistest"
)

const (
	methodOrder   = testpb.Orders_Order_FullMethodName
	methodQuick   = testpb.Orders_Quick_FullMethodName
	methodPlain   = testpb.Orders_Plain_FullMethodName
	methodUpload  = testpb.Orders_Upload_FullMethodName
	methodRelaxed = testpb.Orders_Relaxed_FullMethodName
)

// orders is the test service. Every handler counts how many calls are
// inside at once and reports the lease it runs under.
type orders struct {
	testpb.UnimplementedOrdersServer

	calls     atomic.Int32
	inside    atomic.Int32
	maxInside atomic.Int32

	overlap     chan struct{} // closed when two calls are inside at once
	overlapOnce sync.Once
	entered     chan string // a handler started (method name); buffered
	hold        chan struct{}
	holdOnce    sync.Once
	causes      chan error // cause of a held handler's ctx ending
}

func newOrders() *orders {
	return &orders{
		overlap: make(chan struct{}),
		entered: make(chan string, 256),
		hold:    make(chan struct{}),
		causes:  make(chan error, 16),
	}
}

// release lets every held handler (pause_ms -1) finish.
func (s *orders) release() { s.holdOnce.Do(func() { close(s.hold) }) }

func (s *orders) enter(method string) func() {
	s.calls.Add(1)
	n := s.inside.Add(1)
	for {
		m := s.maxInside.Load()
		if n <= m || s.maxInside.CompareAndSwap(m, n) {
			break
		}
	}
	if n >= 2 {
		s.overlapOnce.Do(func() { close(s.overlap) })
	}
	select {
	case s.entered <- method:
	default:
	}
	return func() { s.inside.Add(-1) }
}

// pause is the handler's work: pauseMs long (cut short when another call
// is inside, so that overlap shows at once), or, for -1, until released or
// the context ends.
func (s *orders) pause(ctx context.Context, pauseMs int64) error {
	switch {
	case pauseMs < 0:
		select {
		case <-s.hold:
			return nil
		case <-ctx.Done():
			select {
			case s.causes <- context.Cause(ctx):
			default:
			}
			return status.FromContextError(ctx.Err()).Err()
		}
	case pauseMs > 0:
		t := time.NewTimer(time.Duration(pauseMs) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.overlap:
		}
	}
	return nil
}

func reply(ctx context.Context, req *testpb.OrderRequest) *testpb.OrderReply {
	l := grpclock.FromContext(ctx)
	return &testpb.OrderReply{Fence: l.Fence(), Key: l.Key(), Echo: req.GetUserId()}
}

func (s *orders) unary(ctx context.Context, name string, req *testpb.OrderRequest) (*testpb.OrderReply, error) {
	defer s.enter(name)()
	if err := s.pause(ctx, req.GetPauseMs()); err != nil {
		return nil, err
	}
	return reply(ctx, req), nil
}

func (s *orders) Order(ctx context.Context, req *testpb.OrderRequest) (*testpb.OrderReply, error) {
	return s.unary(ctx, "Order", req)
}

func (s *orders) Quick(ctx context.Context, req *testpb.OrderRequest) (*testpb.OrderReply, error) {
	return s.unary(ctx, "Quick", req)
}

func (s *orders) Nested(ctx context.Context, req *testpb.OrderRequest) (*testpb.OrderReply, error) {
	return s.unary(ctx, "Nested", req)
}

func (s *orders) Relaxed(ctx context.Context, req *testpb.OrderRequest) (*testpb.OrderReply, error) {
	return s.unary(ctx, "Relaxed", req)
}

func (s *orders) Plain(ctx context.Context, req *testpb.OrderRequest) (*testpb.OrderReply, error) {
	return s.unary(ctx, "Plain", req)
}

// Watch sends one reply, then holds as the request says, then sends a
// second reply.
func (s *orders) Watch(req *testpb.OrderRequest, st grpc.ServerStreamingServer[testpb.OrderReply]) error {
	defer s.enter("Watch")()
	if err := st.Send(reply(st.Context(), req)); err != nil {
		return err
	}
	if err := s.pause(st.Context(), req.GetPauseMs()); err != nil {
		return err
	}
	return st.Send(reply(st.Context(), req))
}

// Upload holds after the first message as it says, then drains the stream.
func (s *orders) Upload(st grpc.ClientStreamingServer[testpb.OrderRequest, testpb.OrderReply]) error {
	defer s.enter("Upload")()
	first, err := st.Recv()
	if err != nil {
		return err
	}
	if err := s.pause(st.Context(), first.GetPauseMs()); err != nil {
		return err
	}
	for {
		if _, err := st.Recv(); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
	}
	return st.SendAndClose(reply(st.Context(), first))
}

func (s *orders) echo(name string, st grpc.BidiStreamingServer[testpb.OrderRequest, testpb.OrderReply]) error {
	defer s.enter(name)()
	for {
		req, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := st.Send(reply(st.Context(), req)); err != nil {
			return err
		}
	}
}

func (s *orders) Chat(st grpc.BidiStreamingServer[testpb.OrderRequest, testpb.OrderReply]) error {
	return s.echo("Chat", st)
}

func (s *orders) Feed(st grpc.BidiStreamingServer[testpb.OrderRequest, testpb.OrderReply]) error {
	return s.echo("Feed", st)
}

// env is one test's world: a real Redis, a Locker with the test's own
// prefix, a real gRPC server on 127.0.0.1:0 and a client.
type env struct {
	redis  *redistest.Server
	rdb    *redis.Client
	locker *core.Locker
	svc    *orders
	client testpb.OrdersClient
	prefix string
	// served receives, for every unary call, the status the server side
	// returned (the lock interceptor's answer as the chain saw it, before
	// the client's own deadline handling can mask it).
	served chan servedCall
}

type servedCall struct {
	method string
	err    error
}

// newEnv serves the test service behind the interceptor built with opts.
func newEnv(t testing.TB, opts ...grpclock.Option) *env {
	t.Helper()
	return newEnvOn(t, newBase(t), opts...)
}

// newEnvOn serves e's service behind the interceptor built with opts on
// e.locker.
func newEnvOn(t testing.TB, e *env, opts ...grpclock.Option) *env {
	t.Helper()
	lk, err := grpclock.New(e.locker, opts...)
	if err != nil {
		t.Fatalf("grpclock.New: %v", err)
	}
	e.serve(t, append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(e.record)}, lk.ServerOptions()...)...)
	return e
}

// record is the outermost unary interceptor: it reports what the rest of
// the chain answered. A call with the metadata "x-server-timeout" (a Go
// duration) runs under that server-side deadline, as a server that bounds
// its calls would: the client then sees the server's answer to the
// deadline, not its own.
func (e *env) record(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if vs := metadata.ValueFromIncomingContext(ctx, "x-server-timeout"); len(vs) > 0 {
		d, err := time.ParseDuration(vs[0])
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "x-server-timeout: %v", err)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	resp, err := handler(ctx, req)
	select {
	case e.served <- servedCall{info.FullMethod, err}:
	default:
	}
	return resp, err
}

// servedErr waits (bounded) for the server side's answer to a call of
// method.
func (e *env) servedErr(t testing.TB, method string) error {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case c := <-e.served:
			if c.method == method {
				return c.err
			}
		case <-timeout:
			t.Fatalf("no answer of %s recorded within 10s", method)
		}
	}
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
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	return newBaseOn(t, srv, rdb, opts...)
}

// newBaseOn is newBase with a given server and client (for example a
// client with go-redis's default timeouts and retries).
func newBaseOn(t testing.TB, srv *redistest.Server, rdb *redis.Client, opts ...core.Option) *env {
	t.Helper()
	prefix := "grpclock-" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()) + ":"
	if len(prefix) > core.MaxPrefixLen {
		prefix = prefix[:core.MaxPrefixLen]
	}
	l, err := core.New(rdb, append([]core.Option{core.WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return &env{redis: srv, rdb: rdb, locker: l, svc: newOrders(), prefix: prefix, served: make(chan servedCall, 256)}
}

func (e *env) serve(t testing.TB, opts ...grpc.ServerOption) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	gs := grpc.NewServer(opts...)
	testpb.RegisterOrdersServer(gs, e.svc)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		e.svc.release()
		gs.Stop()
		<-served
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	e.client = testpb.NewOrdersClient(conn)
}

// waitEntered waits (bounded) for a handler of method to start.
func (e *env) waitEntered(t testing.TB, method string) {
	t.Helper()
	e.waitEnteredOr(t, method, nil)
}

// waitEnteredOr is waitEntered; on timeout it reports what diagnose (if not
// nil) returns, such as the status the call ended with.
func (e *env) waitEnteredOr(t testing.TB, method string, diagnose func() error) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-e.svc.entered:
			if m == method {
				return
			}
		case <-timeout:
			var why error
			if diagnose != nil {
				why = diagnose()
			}
			t.Fatalf("no %s handler started within 10s (the call: %v)", method, why)
		}
	}
}

// lockKey is the Redis key of the lock named name.
func (e *env) lockKey(name string) string { return e.prefix + "{" + name + "}" }

// exists reports whether the Redis key k exists, read with a direct client.
func (e *env) exists(t testing.TB, k string) bool {
	t.Helper()
	n, err := e.rdb.Exists(context.Background(), k).Result()
	if err != nil {
		t.Fatalf("EXISTS %s: %v", k, err)
	}
	return n == 1
}

// lockKeys lists the lock hashes under the test's prefix.
func (e *env) lockKeys(t testing.TB) []string {
	t.Helper()
	keys, err := e.rdb.Keys(context.Background(), e.prefix+"*").Result()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	var locks []string
	for _, k := range keys {
		// Lock hashes end with the hash tag; fence keys (":fence") and the
		// done markers of releases (":done:<owner>") are not locks.
		if strings.HasSuffix(k, "}") {
			locks = append(locks, k)
		}
	}
	return locks
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startHolder starts call, which must reach a handler of method that holds
// (pause_ms -1), and returns once that handler is inside. Earlier
// handlers' signals are drained first so that they are not mistaken for
// this one. The returned channel yields the call's error after
// e.svc.release().
func (e *env) startHolder(t testing.TB, method string, call func() error) <-chan error {
	t.Helper()
	for drained := false; !drained; {
		select {
		case <-e.svc.entered:
		default:
			drained = true
		}
	}
	done := make(chan error, 1)
	go func() { done <- call() }()
	e.waitEntered(t, method)
	return done
}
