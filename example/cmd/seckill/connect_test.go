package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	seckillv1 "github.com/lockgate/lockgate/example/proto/seckill/v1"
	"github.com/lockgate/lockgate/example/proto/seckill/v1/seckillv1connect"
	"github.com/lockgate/lockgate/example/seckill"
	"github.com/lockgate/lockgate/redistest"
)

// servingLine is serve's log line once every listener is up.
var servingLine = regexp.MustCompile(`msg="seckill: serving".* grpc=(\S+) connect=(\S+)`)

// rpcAddrs waits for p's serving line and returns its gRPC and Connect
// addresses.
func (p *serveProc) rpcAddrs(t *testing.T) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := p.stderr.Wait(ctx, servingLine.MatchString)
	if err != nil {
		t.Fatalf("no serving line with grpc= and connect= within 5s:\n%s", tailOf(out))
	}
	m := servingLine.FindStringSubmatch(out)
	return m[1], m[2]
}

// TestServeConnect: `seckill serve -connect-addr 127.0.0.1:0 -grpc-addr
// 127.0.0.1:0` (a real process, -lock redis) serves seckill.v1.Seckill/Order
// over Connect on a port of its own, beside gRPC, and logs both
// addresses. One user's concurrent duplicate orders sent at once through
// Connect (the generated client, over HTTP/1.1 and, with the gRPC
// protocol, over h2c) and through gRPC (grpc-go) to the one node give
// exactly one order: every other answer is AlreadyExists (or
// ResourceExhausted had the 2s wait run out). Bad input over Connect is
// CodeInvalidArgument naming the field, with nothing written. The node's
// /metrics then shows the Lock calls of the RPC adapters, under the
// annotation's key template. Without -connect-addr nothing listens for
// Connect (the log says connect="").
func TestServeConnect(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p := startServeProc(t, srv.URL(), "-grpc-addr", "127.0.0.1:0", "-connect-addr", "127.0.0.1:0", "-http", seckill.StackGin)
	grpcAddr, connectAddr := p.rpcAddrs(t)
	if !strings.HasPrefix(connectAddr, "127.0.0.1:") || connectAddr == "127.0.0.1:0" {
		t.Fatalf("connect address %q: want the port bound", connectAddr)
	}
	base := "http://" + connectAddr

	h1 := &http.Transport{}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	h2c := &http.Transport{Protocols: &protocols}
	defer h1.CloseIdleConnections()
	defer h2c.CloseIdleConnections()
	viaConnect := seckillv1connect.NewSeckillClient(&http.Client{Transport: h1}, base)
	viaConnectGRPC := seckillv1connect.NewSeckillClient(&http.Client{Transport: h2c}, base, connect.WithGRPC())
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	viaGRPC := seckillv1.NewSeckillClient(conn)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const user = 90817263
	connectCode := func(c seckillv1connect.SeckillClient, user, voucher int64) (codes.Code, string) {
		_, err := c.Order(ctx, connect.NewRequest(&seckillv1.OrderRequest{UserId: user, VoucherId: voucher}))
		if err == nil {
			return codes.OK, ""
		}
		var ce *connect.Error
		if !errors.As(err, &ce) {
			return codes.Unknown, err.Error()
		}
		return codes.Code(ce.Code()), ce.Message()
	}
	ways := map[string]func() codes.Code{
		"connect (HTTP/1.1)":  func() codes.Code { c, _ := connectCode(viaConnect, user, 1); return c },
		"connect, gRPC (h2c)": func() codes.Code { c, _ := connectCode(viaConnectGRPC, user, 1); return c },
		"gRPC (-grpc-addr)": func() codes.Code {
			_, err := viaGRPC.Order(ctx, &seckillv1.OrderRequest{UserId: user, VoucherId: 1})
			return status.Code(err)
		},
	}
	const perWay = 4
	var mu sync.Mutex
	got := map[codes.Code]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for name, order := range ways {
		for range perWay {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				code := order()
				mu.Lock()
				got[code]++
				mu.Unlock()
				if code != codes.OK && code != codes.AlreadyExists && code != codes.ResourceExhausted {
					t.Errorf("via %s: %v, want OK, AlreadyExists or ResourceExhausted", name, code)
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	t.Logf("%d concurrent orders of one user over Connect and gRPC: %v", len(ways)*perWay, got)
	if got[codes.OK] != 1 {
		t.Errorf("answers %v: want exactly one OK", got)
	}

	for _, bad := range []struct {
		user, voucher int64
		field         string
	}{{0, 1, "user_id"}, {-1, 1, "user_id"}, {7, 0, "voucher_id"}} {
		if code, msg := connectCode(viaConnect, bad.user, bad.voucher); code != codes.InvalidArgument || !strings.Contains(msg, bad.field) {
			t.Errorf("Connect Order(%d, %d): %v %q, want InvalidArgument naming %s", bad.user, bad.voucher, code, msg, bad.field)
		}
	}

	st, err := seckill.Open(ctx, p.db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if r, err := st.Report(ctx, 1); err != nil || r.Orders != 1 || r.Duplicates != 0 {
		t.Fatalf("report %v (%v), want the one order", r, err)
	}

	resp, err := testClient().Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `outcome="acquired",pattern="order:{user_id}:{voucher_id}"`) {
		t.Errorf("/metrics has no acquired Lock under the annotation's pattern:\n%s", body)
	}

	// Without -connect-addr: no Connect listener.
	q := startServeProc(t, srv.URL(), "-grpc-addr", "127.0.0.1:0")
	if _, c := q.rpcAddrs(t); c != `""` {
		t.Errorf("without -connect-addr: connect=%s, want none", c)
	}
}
