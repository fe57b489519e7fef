package seckill

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/lockgate/lockgate/core"
	seckillv1 "github.com/lockgate/lockgate/example/proto/seckill/v1"
	"github.com/lockgate/lockgate/example/proto/seckill/v1/seckillv1connect"
	"github.com/lockgate/lockgate/redistest"
)

// serveConnectTest serves cfg's Connect API (NewConnectServer: HTTP/1.1
// and h2c) on a free loopback port until the test ends and returns its
// base URL.
func serveConnectTest(t *testing.T, cfg Config) string {
	t.Helper()
	srv, err := NewConnectServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return serveServer(t, srv)
}

// connectClients are clients of the Connect server at base, generated
// code all, one per protocol and transport: "connect" (the Connect
// protocol over HTTP/1.1), "grpc" (the gRPC protocol over h2c: HTTP/2
// without TLS, prior knowledge), "grpcweb" (gRPC-Web over HTTP/1.1). Their
// connections are closed when the test ends.
func connectClients(t *testing.T, base string) map[string]seckillv1connect.SeckillClient {
	t.Helper()
	h1 := &http.Transport{}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2c := &http.Transport{Protocols: &p}
	t.Cleanup(func() { h1.CloseIdleConnections(); h2c.CloseIdleConnections() })
	return map[string]seckillv1connect.SeckillClient{
		"connect": seckillv1connect.NewSeckillClient(&http.Client{Transport: h1}, base),
		"grpc":    seckillv1connect.NewSeckillClient(&http.Client{Transport: h2c}, base, connect.WithGRPC()),
		"grpcweb": seckillv1connect.NewSeckillClient(&http.Client{Transport: h1}, base, connect.WithGRPCWeb()),
	}
}

// grpcClient is a grpc-go client of addr ("127.0.0.1:port", a gRPC or a
// Connect server), closed when the test ends.
func grpcClient(t *testing.T, addr string) seckillv1.SeckillClient {
	t.Helper()
	conn, err := grpc.NewClient(strings.TrimPrefix(addr, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return seckillv1.NewSeckillClient(conn)
}

// rpcCode is the code and message of a Connect or gRPC call's error (OK
// for nil), and whether a Connect error carried a RetryInfo.
func rpcCode(err error) (codes.Code, string, bool) {
	if err == nil {
		return codes.OK, "", false
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		retry := false
		for _, d := range ce.Details() {
			if v, err := d.Value(); err == nil {
				if _, ok := v.(*errdetails.RetryInfo); ok {
					retry = true
				}
			}
		}
		return codes.Code(ce.Code()), ce.Message(), retry
	}
	s := status.Convert(err)
	return s.Code(), s.Message(), false
}

// connectOrder places an order through a Connect client.
func connectOrder(ctx context.Context, c seckillv1connect.SeckillClient, user, voucher int64) (int64, codes.Code, string) {
	r, err := c.Order(ctx, connect.NewRequest(&seckillv1.OrderRequest{UserId: user, VoucherId: voucher}))
	code, msg, _ := rpcCode(err)
	if err != nil {
		return 0, code, msg
	}
	return r.Msg.GetOrderId(), code, msg
}

// TestConnect: seckill.v1.Seckill/Order over Connect (NewConnectServer),
// locked by connectlock from the proto annotation, with the outcomes of
// gRPC as Connect codes, on each of Connect's protocols (Connect and
// gRPC-Web over HTTP/1.1, gRPC over h2c — also from a grpc-go client):
// bad input is CodeInvalidArgument naming the field or CodeNotFound, with
// nothing locked or written; a lock held elsewhere (on the key HTTP and
// gRPC use) is CodeResourceExhausted with a RetryInfo, after the Config's
// 100ms wait (not the Locker's 2s); Redis down is CodeUnavailable without
// running the handler.
func TestConnect(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client(t)
	st := openStore(t, filepath.Join(t.TempDir(), "seckill.db"))
	seed(t, st, 2)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	locker := core.Must(core.New(client)) // the Locker's wait: 2s
	defer locker.Close()
	base := serveConnectTest(t, Config{Service: &Service{Store: st}, Mode: LockRedis, Locker: locker, Wait: 100 * time.Millisecond})
	clients := connectClients(t, base)
	ctx := context.Background()

	bads := []struct {
		user, voucher int64
		code          codes.Code
		field         string
	}{
		{0, 1, codes.InvalidArgument, "user_id"},
		{-4, 1, codes.InvalidArgument, "user_id"},
		{1, 0, codes.InvalidArgument, "voucher_id"},
		{1, -1, codes.InvalidArgument, "voucher_id"},
		{1, 999, codes.NotFound, MsgUnknownVoucher},
	}
	for name, c := range clients {
		for _, bad := range bads {
			if _, code, msg := connectOrder(ctx, c, bad.user, bad.voucher); code != bad.code || !strings.Contains(msg, bad.field) {
				t.Errorf("%s: Order(%d, %d): %v %q, want %v naming %q", name, bad.user, bad.voucher, code, msg, bad.code, bad.field)
			}
		}
	}
	gc := grpcClient(t, base) // grpc-go, over h2c, to the Connect server
	for _, bad := range bads {
		_, err := gc.Order(ctx, &seckillv1.OrderRequest{UserId: bad.user, VoucherId: bad.voucher})
		if s := status.Convert(err); s.Code() != bad.code || !strings.Contains(s.Message(), bad.field) {
			t.Errorf("grpc-go: Order(%d, %d): %v, want %v naming %q", bad.user, bad.voucher, err, bad.code, bad.field)
		}
	}
	if n, _ := rc.DBSize(ctx).Result(); n != 0 {
		t.Fatalf("bad input locked something: %d keys in Redis", n)
	}
	if r := report(t, st); r.Orders != 0 {
		t.Fatalf("bad input wrote: %v", r)
	}

	if id, code, msg := connectOrder(ctx, clients["connect"], 1, testVoucher); code != codes.OK || id <= 0 {
		t.Fatalf("first order: %v %q", code, msg)
	}
	for name, c := range clients {
		if _, code, msg := connectOrder(ctx, c, 1, testVoucher); code != codes.AlreadyExists || msg != MsgAlreadyPurchased {
			t.Fatalf("%s: second order: %v %q, want AlreadyExists %q", name, code, msg, MsgAlreadyPurchased)
		}
	}

	// User 3's lock held elsewhere (as an HTTP or gRPC node would hold it).
	lease, err := locker.Lock(ctx, OrderKey(3, testVoucher))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range clients {
		start := time.Now()
		_, err := c.Order(ctx, connect.NewRequest(&seckillv1.OrderRequest{UserId: 3, VoucherId: testVoucher}))
		took := time.Since(start)
		code, msg, retry := rpcCode(err)
		if code != codes.ResourceExhausted || !retry {
			t.Fatalf("%s: busy: %v %q (RetryInfo %v), want ResourceExhausted with a RetryInfo", name, code, msg, retry)
		}
		if took < 100*time.Millisecond || took > time.Second {
			t.Errorf("%s: busy answered after %v, want the Config's 100ms wait (the Locker's is 2s)", name, took)
		}
	}
	lease.Unlock(ctx)

	if _, code, _ := connectOrder(ctx, clients["grpc"], 2, testVoucher); code != codes.OK {
		t.Fatalf("order of user 2: %v", code)
	}
	if _, code, msg := connectOrder(ctx, clients["grpcweb"], 3, testVoucher); code != codes.FailedPrecondition || msg != MsgOutOfStock {
		t.Fatalf("out of stock: %v %q", code, msg)
	}

	srv.Stop()
	if _, code, msg := connectOrder(ctx, clients["connect"], 4, testVoucher); code != codes.Unavailable {
		t.Fatalf("redis down: %v %q, want Unavailable", code, msg)
	}
	if r := report(t, st); r.Orders != 2 {
		t.Fatalf("%v: want the 2 orders placed before", r)
	}
}

// TestConnectLocalAndNone: the other lock modes serve Connect too.
func TestConnectLocalAndNone(t *testing.T) {
	for _, mode := range []LockMode{LockLocal, LockNone} {
		t.Run(string(mode), func(t *testing.T) {
			st := openStore(t, "")
			seed(t, st, 5)
			c := connectClients(t, serveConnectTest(t, Config{Service: &Service{Store: st}, Mode: mode}))["connect"]
			if _, code, msg := connectOrder(context.Background(), c, 1, testVoucher); code != codes.OK {
				t.Fatalf("first order: %v %q", code, msg)
			}
			if _, code, _ := connectOrder(context.Background(), c, 1, testVoucher); code != codes.AlreadyExists {
				t.Fatalf("second order: %v", code)
			}
		})
	}
}

// TestConnectAndGRPCOneLock: one node serving seckill.v1.Seckill/Order on
// its gRPC server (grpclock) and its Connect server (connectlock), one
// Locker: the two interceptors take the same lock, read from the same
// annotation.
//
//   - duplicates: 12 users, each sending 10 concurrent orders at once over
//     every way in — Connect (HTTP/1.1), gRPC over h2c and gRPC-Web to the
//     Connect server, grpc-go to the gRPC server and to the Connect server
//     — get exactly one order each (the rest: AlreadyExists, or
//     ResourceExhausted when the wait ran out), none duplicated.
//   - the same lock, deterministically: while a gRPC call holds user 99's
//     lock (its Order blocked), every Connect call of user 99 is
//     ResourceExhausted; while a Connect call holds it, a gRPC call is.
//     Once released, the holder's order is placed and the others are then
//     AlreadyExists.
func TestConnectAndGRPCOneLock(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	locker := core.Must(core.New(client))
	defer locker.Close()
	ctx := context.Background()

	t.Run("duplicates", func(t *testing.T) {
		st := openStore(t, "")
		seed(t, st, 100)
		// A little work under the lock, so that the duplicates overlap.
		svc := &Service{Store: st, enter: func(context.Context, int64, int64) { time.Sleep(5 * time.Millisecond) }}
		cfg := Config{Service: svc, Mode: LockRedis, Locker: locker, Wait: 5 * time.Second}
		grpcAddr := serveGRPCTest(t, cfg).Target()
		base := serveConnectTest(t, cfg)
		cc := connectClients(t, base)
		viaGRPC, viaConnectGRPC := grpcClient(t, grpcAddr), grpcClient(t, base)
		grpcOrder := func(c seckillv1.SeckillClient) func(int64) codes.Code {
			return func(user int64) codes.Code {
				_, err := c.Order(ctx, &seckillv1.OrderRequest{UserId: user, VoucherId: testVoucher})
				return status.Code(err)
			}
		}
		connectVia := func(c seckillv1connect.SeckillClient) func(int64) codes.Code {
			return func(user int64) codes.Code { _, code, _ := connectOrder(ctx, c, user, testVoucher); return code }
		}
		ways := map[string]func(int64) codes.Code{
			"connect":            connectVia(cc["connect"]),
			"connect/grpc (h2c)": connectVia(cc["grpc"]),
			"connect/grpcweb":    connectVia(cc["grpcweb"]),
			"grpc-go → grpc":     grpcOrder(viaGRPC),
			"grpc-go → connect":  grpcOrder(viaConnectGRPC),
		}
		const users, perWay = 12, 2
		var mu sync.Mutex
		got := map[int64]map[codes.Code]int{}
		var wg sync.WaitGroup
		for u := int64(1); u <= users; u++ {
			got[u] = map[codes.Code]int{}
			for name, order := range ways {
				for range perWay {
					wg.Add(1)
					go func() {
						defer wg.Done()
						code := order(u)
						mu.Lock()
						got[u][code]++
						mu.Unlock()
						if code != codes.OK && code != codes.AlreadyExists && code != codes.ResourceExhausted {
							t.Errorf("user %d via %s: %v, want OK, AlreadyExists or ResourceExhausted", u, name, code)
						}
					}()
				}
			}
		}
		wg.Wait()
		for u, codes_ := range got {
			if codes_[codes.OK] != 1 {
				t.Errorf("user %d: answers %v, want exactly one OK of %d", u, codes_, len(ways)*perWay)
			}
		}
		r := report(t, st)
		t.Logf("%d users × %d concurrent orders over gRPC and Connect: %v; user 1's answers %v", users, len(ways)*perWay, r, got[1])
		if r.Orders != users || r.Duplicates != 0 {
			t.Fatalf("%v, want %d orders and no duplicate", r, users)
		}
	})

	t.Run("one lock", func(t *testing.T) {
		// Each round's Order of user 99 runs first and blocks (entered),
		// until the test lets it go on (release).
		st := openStore(t, "")
		seed(t, st, 100)
		const user = 99
		var (
			block   atomic.Bool
			entered = make(chan struct{}, 1)
			release = make(chan struct{}) // one send lets the holder go on
		)
		svc := &Service{Store: st, enter: func(_ context.Context, u, _ int64) {
			if u == user && block.CompareAndSwap(true, false) {
				entered <- struct{}{}
				<-release
			}
		}}
		cfg := Config{Service: svc, Mode: LockRedis, Locker: locker, Wait: 100 * time.Millisecond}
		gc := seckillv1.NewSeckillClient(serveGRPCTest(t, cfg))
		cc := connectClients(t, serveConnectTest(t, cfg))
		grpcCall := func() codes.Code {
			_, err := gc.Order(ctx, &seckillv1.OrderRequest{UserId: user, VoucherId: testVoucher})
			return status.Code(err)
		}

		// A over gRPC holds the lock; B over each Connect protocol is busy.
		block.Store(true)
		doneA := make(chan codes.Code, 1)
		go func() { doneA <- grpcCall() }()
		<-entered
		for name, c := range cc {
			if _, code, msg := connectOrder(ctx, c, user, testVoucher); code != codes.ResourceExhausted {
				t.Errorf("Connect (%s) while gRPC holds the lock: %v %q, want ResourceExhausted", name, code, msg)
			}
		}
		release <- struct{}{}
		if code := <-doneA; code != codes.OK {
			t.Fatalf("the gRPC holder: %v, want OK", code)
		}
		if _, code, _ := connectOrder(ctx, cc["connect"], user, testVoucher); code != codes.AlreadyExists {
			t.Fatalf("Connect after the gRPC order: %v, want AlreadyExists", code)
		}

		// The other way round, on fresh data: A over Connect (gRPC over
		// h2c) holds the lock, B over gRPC is busy.
		seed(t, st, 100)
		block.Store(true)
		doneC := make(chan codes.Code, 1)
		go func() { _, code, _ := connectOrder(ctx, cc["grpc"], user, testVoucher); doneC <- code }()
		<-entered
		if code := grpcCall(); code != codes.ResourceExhausted {
			t.Errorf("gRPC while Connect holds the lock: %v, want ResourceExhausted", code)
		}
		release <- struct{}{}
		if code := <-doneC; code != codes.OK {
			t.Fatalf("the Connect holder: %v, want OK", code)
		}
		if code := grpcCall(); code != codes.AlreadyExists {
			t.Fatalf("gRPC after the Connect order: %v, want AlreadyExists", code)
		}
		if r := report(t, st); r.Orders != 1 {
			t.Fatalf("%v, want the one order of the second round", r)
		}
	})
}
