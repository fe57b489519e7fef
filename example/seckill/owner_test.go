package seckill

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/lockgate/lockgate/core"
	seckillv1 "github.com/lockgate/lockgate/example/proto/seckill/v1"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// The obvious names a client could try to pass itself off as a lock's
// owner with.
var (
	ownerHeaders = []string{"X-Lock-Owner", "X-Owner", "Owner", "X-Lockgate-Owner", "Lockgate-Owner", "X-Request-Id"}
	ownerQueries = []string{"owner", "lock_owner"}
	ownerMD      = []string{"x-lock-owner", "lockgate-owner", "x-lockgate-owner", "x-owner", "owner", "x-request-id"}
)

// TestNoOwnerFromRequest: while request A of user 1 holds order:1:1 in
// the service (its Order blocked), request B of the same user and voucher
// never re-enters A's lock, whatever it carries — every owner-ish header,
// query parameter and JSON body field (HTTP, every stack), every owner-ish
// metadata key (gRPC) or request header (Connect), set to each value observable about A: the fence and
// key of its lease, its X-Request-Id, and even the owner token of the lock
// hash in Redis. Every B is 429 with Retry-After (gRPC ResourceExhausted)
// and writes nothing. The controls: inside A's Order a nested Lock with
// its context re-enters; once A is released it is served (200), and the
// same B then passes the lock (400 already purchased: A's order).
func TestNoOwnerFromRequest(t *testing.T) {
	// Alone, not side by side: beside the other tests its first order once
	// answered 503 in a clean-clone run (not explained).
	srv := redistest.Start(t)
	rc := srv.Client(t)
	for _, stack := range append(append([]string{}, Stacks...), "grpc", "connect") {
		t.Run(stack, func(t *testing.T) {
			st := openStore(t, "")
			seed(t, st, 5)
			client := redis.NewClient(&redis.Options{Addr: srv.Addr})
			locker := core.Must(core.New(client))
			t.Cleanup(func() { locker.Close(); client.Close() })
			type held struct {
				key       string
				fence     int64
				reentered bool
				err       error
			}
			heldc := make(chan held, 1)
			release := make(chan struct{})
			releaseOnce := sync.OnceFunc(func() { close(release) })
			defer releaseOnce()
			var entered atomic.Int32
			enter := func(ctx context.Context, user, voucher int64) {
				if entered.Add(1) > 1 {
					return // B, after A: served normally
				}
				lease := core.FromContext(ctx)
				h := held{key: lease.Key(), fence: lease.Fence()}
				inner, err := locker.Lock(ctx, lease.Key(), core.WithWait(core.NoWait))
				if err == nil {
					h.reentered = inner.Reentrant()
					err = inner.Unlock(ctx)
				}
				h.err = err
				heldc <- h
				<-release
			}
			cfg := Config{Service: &Service{Store: st, enter: enter}, Mode: LockRedis, Locker: locker, Wait: 50 * time.Millisecond}
			const requestID = "req-a-6f1c2d"

			// order sends one order of user 1 carrying the owner-ish
			// names set to v ("" for none) and returns its status
			// ("429" / "ResourceExhausted" style) and error text.
			var order func(ctx context.Context, v string, names []string) (string, string)
			switch stack {
			case "grpc":
				c := seckillv1.NewSeckillClient(serveGRPCTest(t, cfg))
				order = func(ctx context.Context, v string, names []string) (string, string) {
					kv := []string{"x-request-id", requestID}
					if v != "" {
						kv = nil
						for _, n := range names {
							kv = append(kv, n, v)
						}
					}
					_, err := c.Order(metadata.NewOutgoingContext(ctx, metadata.Pairs(kv...)), &seckillv1.OrderRequest{UserId: 1, VoucherId: testVoucher})
					s := status.Convert(err)
					return s.Code().String(), s.Message()
				}
			case "connect":
				c := connectClients(t, serveConnectTest(t, cfg))["connect"]
				order = func(ctx context.Context, v string, names []string) (string, string) {
					req := connect.NewRequest(&seckillv1.OrderRequest{UserId: 1, VoucherId: testVoucher})
					req.Header().Set("X-Request-Id", requestID)
					if v != "" {
						req.Header().Del("X-Request-Id")
						for _, n := range names {
							req.Header().Set(n, v)
						}
					}
					_, err := c.Order(ctx, req)
					if err == nil {
						return codes.OK.String(), ""
					}
					ce := new(connect.Error)
					errors.As(err, &ce)
					return codes.Code(ce.Code()).String(), ce.Message()
				}
			default:
				base := serveHTTP(t, cfg, stack)
				order = func(ctx context.Context, v string, names []string) (string, string) {
					q := url.Values{"user_id": {"1"}}
					h := http.Header{"X-Request-Id": {requestID}}
					var body io.Reader
					if v != "" {
						h = http.Header{"Content-Type": {"application/json"}}
						body = strings.NewReader(`{"owner": ` + strconv.Quote(v) + `, "lock_owner": ` + strconv.Quote(v) + `}`)
						for _, n := range names {
							if strings.ToLower(n) == n { // a query name
								q.Set(n, v)
							} else {
								h.Set(n, v)
							}
						}
					}
					req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/voucher-order/seckill/1?"+q.Encode(), body)
					if err != nil {
						t.Fatal(err)
					}
					req.Header = h
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					b, _ := io.ReadAll(resp.Body)
					code := strconv.Itoa(resp.StatusCode)
					if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
						code += " without Retry-After"
					}
					return code, string(b)
				}
			}
			busy, served, already := "429", "200", "400"
			names := append(append([]string{}, ownerHeaders...), ownerQueries...)
			if stack == "grpc" || stack == "connect" {
				busy, served, already = codes.ResourceExhausted.String(), codes.OK.String(), codes.AlreadyExists.String()
				names = ownerMD
			}

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			doneA := make(chan string, 1)
			go func() { code, msg := order(ctx, "", nil); doneA <- code + " " + msg }()
			var h held
			select {
			case h = <-heldc:
			case r := <-doneA:
				t.Fatalf("A answered %s without holding the lock", r)
			}
			if h.err != nil || !h.reentered || h.key != OrderKey(1, testVoucher) {
				t.Fatalf("control: a nested Lock with A's context: %+v; want a re-entry of %s", h, OrderKey(1, testVoucher))
			}
			redisKey := core.DefaultPrefix + "{" + h.key + "}"
			owner, _, err := locktest.Holder(ctx, rc, redisKey)
			if err != nil || owner == "" {
				t.Fatalf("%s's owner: %q %v", redisKey, owner, err)
			}
			values := []string{strconv.FormatInt(h.fence, 10), h.key, owner, requestID}
			for _, v := range values {
				// Every name at once, then each alone.
				sets := [][]string{names}
				for _, n := range names {
					sets = append(sets, []string{n})
				}
				for _, set := range sets {
					if code, msg := order(ctx, v, set); code != busy {
						t.Errorf("B with %v = %q: %s %q, want %s (busy): never A's lock", set, v, code, msg, busy)
					}
				}
			}
			if r := report(t, st); r.Orders != 0 {
				t.Fatalf("while A held the lock: %v", r)
			}
			if got, _, _ := locktest.Holder(ctx, rc, redisKey); got != owner {
				t.Fatalf("A's lock hash now has owner %q, want A's %q", got, owner)
			}

			releaseOnce()
			if r := <-doneA; !strings.HasPrefix(r, served+" ") {
				t.Fatalf("A: %s, want %s", r, served)
			}
			if code, msg := order(ctx, owner, names); code != already {
				t.Fatalf("B after A: %s %q, want %s (it passes the lock, A has ordered)", code, msg, already)
			}
			if r := report(t, st); r.Orders != 1 {
				t.Fatalf("%v, want A's order only", r)
			}
			if n, _ := rc.Exists(ctx, redisKey).Result(); n != 0 {
				t.Fatalf("%s still held", redisKey)
			}
		})
	}
}
