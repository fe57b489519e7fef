package seckill

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	seckillv1 "github.com/lockgate/lockgate/example/proto/seckill/v1"
)

// TestLocalLocksSharedByANodesServers: under LockLocal, a node's HTTP and
// gRPC servers built from one Config with one Local lock each other out:
// while an HTTP order of user 5 holds its in-process lock (blocked inside
// Order), a gRPC order of user 5 waits out its 200ms and is
// ResourceExhausted, never entering Order. The control: with Local nil
// (each server a set of its own, as before) the gRPC order enters Order
// while the HTTP one is inside.
func TestLocalLocksSharedByANodesServers(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run("shared="+strconv.FormatBool(shared), func(t *testing.T) {
			st := openStore(t, "")
			seed(t, st, 5)
			inside, release := make(chan struct{}), make(chan struct{})
			var entered atomic.Int32
			svc := &Service{Store: st, enter: func(context.Context, int64, int64) {
				if entered.Add(1) == 1 {
					close(inside)
					<-release // the first order holds the lock until told
				}
			}}
			cfg := Config{Service: svc, Mode: LockLocal, Wait: 200 * time.Millisecond}
			if shared {
				cfg.Local = &LocalLocks{}
			}
			base := serveHTTP(t, cfg, StackNetHTTP)
			grpcc := seckillv1.NewSeckillClient(serveGRPCTest(t, cfg))

			httpDone := make(chan int, 1)
			go func() {
				resp, err := http.Post(base+"/voucher-order/seckill/1?user_id=5", "", nil)
				if err != nil {
					httpDone <- 0
					return
				}
				resp.Body.Close()
				httpDone <- resp.StatusCode
			}()
			select {
			case <-inside:
			case <-time.After(20 * time.Second):
				t.Fatal("the HTTP order never entered Order")
			}
			_, err := grpcc.Order(context.Background(), &seckillv1.OrderRequest{UserId: 5, VoucherId: testVoucher})
			close(release)
			if code := <-httpDone; code != http.StatusOK && shared {
				t.Errorf("HTTP order: %d, want 200", code)
			}
			switch {
			case shared && (status.Code(err) != codes.ResourceExhausted || entered.Load() != 1):
				t.Fatalf("gRPC order while the HTTP one held the lock: %v (Order entered %d times), want ResourceExhausted without entering", err, entered.Load())
			case !shared && entered.Load() != 2:
				t.Fatalf("control: servers with locks of their own: gRPC order %v entered Order %d times in all, want 2 (no mutual exclusion)", err, entered.Load())
			}
		})
	}
}
