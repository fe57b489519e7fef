package seckill

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/lockgate/lockgate/core"
	seckillv1 "github.com/lockgate/lockgate/example/proto/seckill/v1"
	"github.com/lockgate/lockgate/redistest"
)

// serveGRPC serves cfg's gRPC API on a free loopback port and returns a
// connection to it; both end with the test.
func serveGRPCTest(t *testing.T, cfg Config) *grpc.ClientConn {
	t.Helper()
	srv, err := NewGRPCServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return conn
}

// TestGRPC: seckill.v1.Seckill/Order under the annotation's lock, with the
// same outcomes as HTTP as gRPC codes; bad input is INVALID_ARGUMENT
// naming the field or NOT_FOUND, with nothing locked or written; a lock
// held (on the key the HTTP route uses) is RESOURCE_EXHAUSTED; Redis down
// is UNAVAILABLE without running the handler; reflection lists the
// service.
func TestGRPC(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client(t)
	st := openStore(t, filepath.Join(t.TempDir(), "seckill.db"))
	seed(t, st, 2)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	locker := core.Must(core.New(client, core.WithWait(100*time.Millisecond)))
	defer locker.Close()
	conn := serveGRPCTest(t, Config{Service: &Service{Store: st}, Mode: LockRedis, Locker: locker, Wait: 100 * time.Millisecond})
	c := seckillv1.NewSeckillClient(conn)
	ctx := context.Background()
	order := func(user, voucher int64) (int64, codes.Code, string) {
		r, err := c.Order(ctx, &seckillv1.OrderRequest{UserId: user, VoucherId: voucher})
		s, _ := status.FromError(err)
		return r.GetOrderId(), s.Code(), s.Message()
	}

	for _, bad := range []struct {
		user, voucher int64
		code          codes.Code
		field         string
	}{
		{0, 1, codes.InvalidArgument, "user_id"},
		{-4, 1, codes.InvalidArgument, "user_id"},
		{1, 0, codes.InvalidArgument, "voucher_id"},
		{1, 999, codes.NotFound, MsgUnknownVoucher},
	} {
		if _, code, msg := order(bad.user, bad.voucher); code != bad.code || !strings.Contains(msg, bad.field) {
			t.Errorf("Order(%d, %d): %v %q, want %v naming %q", bad.user, bad.voucher, code, msg, bad.code, bad.field)
		}
	}
	if n, _ := rc.DBSize(ctx).Result(); n != 0 {
		t.Fatalf("bad input locked something: %d keys in Redis", n)
	}
	if r := report(t, st); r.Orders != 0 {
		t.Fatalf("bad input wrote: %v", r)
	}

	if id, code, msg := order(1, testVoucher); code != codes.OK || id <= 0 {
		t.Fatalf("first order: %v %q", code, msg)
	}
	if _, code, msg := order(1, testVoucher); code != codes.AlreadyExists || msg != MsgAlreadyPurchased {
		t.Fatalf("second order: %v %q, want AlreadyExists", code, msg)
	}

	// User 3's lock held elsewhere (as an HTTP node would hold it).
	lease, err := locker.Lock(ctx, OrderKey(3, testVoucher))
	if err != nil {
		t.Fatal(err)
	}
	if _, code, msg := order(3, testVoucher); code != codes.ResourceExhausted {
		t.Fatalf("busy: %v %q, want ResourceExhausted", code, msg)
	}
	lease.Unlock(ctx)

	if _, code, _ := order(2, testVoucher); code != codes.OK {
		t.Fatalf("order of user 2: %v", code)
	}
	if _, code, msg := order(3, testVoucher); code != codes.FailedPrecondition || msg != MsgOutOfStock {
		t.Fatalf("out of stock: %v %q", code, msg)
	}

	// Reflection lists the service.
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	stream.CloseSend()
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !strings.Contains(strings.Join(names, ","), "seckill.v1.Seckill") {
		t.Fatalf("reflection lists %v", names)
	}

	srv.Stop()
	if _, code, msg := order(4, testVoucher); code != codes.Unavailable {
		t.Fatalf("redis down: %v %q, want Unavailable", code, msg)
	}
	if r := report(t, st); r.Orders != 2 {
		t.Fatalf("%v: want the 2 orders placed before", r)
	}
}

// TestGRPCLocalAndNone: the other lock modes serve gRPC too.
func TestGRPCLocalAndNone(t *testing.T) {
	for _, mode := range []LockMode{LockLocal, LockNone} {
		t.Run(string(mode), func(t *testing.T) {
			st := openStore(t, "")
			seed(t, st, 5)
			c := seckillv1.NewSeckillClient(serveGRPCTest(t, Config{Service: &Service{Store: st}, Mode: mode}))
			if _, err := c.Order(context.Background(), &seckillv1.OrderRequest{UserId: 1, VoucherId: testVoucher}); err != nil {
				t.Fatal(err)
			}
			_, err := c.Order(context.Background(), &seckillv1.OrderRequest{UserId: 1, VoucherId: testVoucher})
			if status.Code(err) != codes.AlreadyExists {
				t.Fatalf("second order: %v", err)
			}
		})
	}
}
