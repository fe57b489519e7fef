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
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/lockgate/lockgate/core"
	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
	"github.com/lockgate/lockgate/interceptor/grpc/internal/testpb"
	"github.com/lockgate/lockgate/redistest"
)

const (
	methodOrder  = testpb.Orders_Order_FullMethodName
	methodQuick  = testpb.Orders_Quick_FullMethodName
	methodPlain  = testpb.Orders_Plain_FullMethodName
	methodUpload = testpb.Orders_Upload_FullMethodName
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
	l := grpclock.LeaseFromContext(ctx)
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
}

// newEnv serves the test service behind the interceptor built with opts.
func newEnv(t testing.TB, opts ...grpclock.Option) *env {
	t.Helper()
	e := newBase(t)
	lk, err := grpclock.New(e.locker, opts...)
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

func newBase(t testing.TB) *env {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	prefix := "grpclock-" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()) + ":"
	if len(prefix) > core.MaxPrefixLen {
		prefix = prefix[:core.MaxPrefixLen]
	}
	l := core.New(rdb, core.WithPrefix(prefix))
	t.Cleanup(func() { l.Close() })
	return &env{redis: srv, rdb: rdb, locker: l, svc: newOrders(), prefix: prefix}
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
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-e.svc.entered:
			if m == method {
				return
			}
		case <-timeout:
			t.Fatalf("no %s handler started within 10s", method)
		}
	}
}

// lockKeys lists the Redis keys under the test's prefix.
func (e *env) lockKeys(t testing.TB) []string {
	t.Helper()
	keys, err := e.rdb.Keys(context.Background(), e.prefix+"*").Result()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	var locks []string
	for _, k := range keys {
		if !strings.HasSuffix(k, ":fence") {
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
