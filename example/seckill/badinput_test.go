package seckill

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/redistest"
)

// do sends one request and returns status, decoded error text and headers.
func do(t *testing.T, method, url string, body io.Reader) (int, map[string]any, http.Header) {
	t.Helper()
	resp, b := roundTrip(t, method, url, body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s: %d, body %q is not JSON", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode, out, resp.Header
}

// roundTrip sends one request and returns the response and its whole body.
func roundTrip(t *testing.T, method, url string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestBadInput: missing or non-numeric ids are 400 naming the field, an
// unknown voucher is 404, an oversized body is 413; nothing is written
// (orders, stock) and nothing is locked (the lock service's Redis stays
// empty). On every HTTP stack, in LockRedis mode.
func TestBadInput(t *testing.T) {
	srv := redistest.Start(t)
	rc := srv.Client(t)
	// Over the 1 KiB limit but within the server's 4 KiB read buffer:
	// fasthttp answers 413 from the header and closes, and a body it never
	// read (64 KiB did) would make the close a reset that can drop the
	// answer before the client reads it.
	big := strings.Repeat("x", 2<<10)
	cases := []struct {
		name, path string
		body       string
		want       int
		field      string // must appear in the error text
	}{
		{"missing user_id", "/voucher-order/seckill/1", "", 400, "user_id"},
		{"empty user_id", "/voucher-order/seckill/1?user_id=", "", 400, "user_id"},
		{"non-numeric user_id", "/voucher-order/seckill/1?user_id=abc", "", 400, "user_id"},
		{"negative user_id", "/voucher-order/seckill/1?user_id=-3", "", 400, "user_id"},
		{"overflowing user_id", "/voucher-order/seckill/1?user_id=99999999999999999999", "", 400, "user_id"},
		{"non-numeric voucher_id", "/voucher-order/seckill/abc?user_id=1", "", 400, "voucher_id"},
		{"zero voucher_id", "/voucher-order/seckill/0?user_id=1", "", 400, "voucher_id"},
		{"unknown voucher", "/voucher-order/seckill/999?user_id=1", "", 404, "Voucher not found"},
		{"oversized body", "/voucher-order/seckill/1?user_id=1", big, 413, "too large"},
		{"voucher view non-numeric", "/vouchers/abc", "", 400, "voucher_id"},
		{"voucher view unknown", "/vouchers/999", "", 404, "Voucher not found"},
	}
	for _, stack := range Stacks {
		t.Run(stack, func(t *testing.T) {
			dsn := filepath.Join(t.TempDir(), "seckill.db")
			st := openStore(t, dsn)
			seed(t, st, 5)
			base := startNodes(t, 1, dsn, nodeOpts{mode: LockRedis, redis: srv, http: stack})[0]
			for _, c := range cases {
				method := http.MethodPost
				if strings.HasPrefix(c.path, "/vouchers/") {
					method = http.MethodGet
				}
				var body io.Reader
				if c.body != "" {
					body = strings.NewReader(c.body)
				}
				code, out, _ := do(t, method, base+c.path, body)
				msg, _ := out["error"].(string)
				if code != c.want || !strings.Contains(msg, c.field) {
					t.Errorf("%s: %d %q, want %d naming %q", c.name, code, msg, c.want, c.field)
				}
			}
			if v, err := st.Voucher(context.Background(), testVoucher); err != nil || v.Stock != 5 || v.Orders != 0 {
				t.Errorf("after bad input: %+v, %v; want stock 5 and no orders", v, err)
			}
			if n, err := rc.DBSize(context.Background()).Result(); err != nil || n != 0 {
				t.Errorf("after bad input Redis holds %d keys (%v); nothing may be locked", n, err)
			}
			// The control: a good request does order (and lock).
			code, out, _ := do(t, http.MethodPost, base+"/voucher-order/seckill/1?user_id=7", nil)
			if code != 200 || out["order_id"] == nil {
				t.Fatalf("good request: %d %v", code, out)
			}
			code, out, _ = do(t, http.MethodGet, base+"/vouchers/1", nil)
			if code != 200 || out["id"] != 1.0 || out["stock"] != 4.0 || out["orders"] != 1.0 {
				t.Fatalf("GET /vouchers/1: %d %v, want id 1, stock 4, orders 1", code, out)
			}
			code, out, _ = do(t, http.MethodPost, base+"/voucher-order/seckill/1?user_id=7", nil)
			if code != 400 || out["error"] != MsgAlreadyPurchased {
				t.Fatalf("second order: %d %v, want 400 %q", code, out, MsgAlreadyPurchased)
			}
			rc.FlushAll(context.Background())
		})
	}
}

// TestOutOfStock: when the stock is gone the answer is 400 Out of stock
// and nothing is written.
func TestOutOfStock(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "seckill.db")
	st := openStore(t, dsn)
	seed(t, st, 1)
	base := startNodes(t, 1, dsn, nodeOpts{mode: LockNone})[0]
	if code, out, _ := do(t, http.MethodPost, base+"/voucher-order/seckill/1?user_id=1", nil); code != 200 {
		t.Fatalf("first order: %d %v", code, out)
	}
	code, out, _ := do(t, http.MethodPost, base+"/voucher-order/seckill/1?user_id=2", nil)
	if code != 400 || out["error"] != MsgOutOfStock {
		t.Fatalf("order without stock: %d %v, want 400 %q", code, out, MsgOutOfStock)
	}
	if r := report(t, st); r.Orders != 1 {
		t.Fatalf("%v, want 1 order", r)
	}
}

// TestBusyAndUnavailable: a lock held elsewhere past the wait budget is
// 429 with Retry-After; a lock service that is down is 503; in both cases
// the handler does not run (nothing written). On every HTTP stack. The
// budget is 1s: the node's first lock also checks the server and loads the
// script, and beside the other tests under the race detector that once
// took more than 100ms, which was answered 503 (unavailable), not busy.
func TestBusyAndUnavailable(t *testing.T) {
	t.Parallel()
	for _, stack := range Stacks {
		t.Run(stack, func(t *testing.T) {
			srv := redistest.Start(t)
			dsn := filepath.Join(t.TempDir(), "seckill.db")
			st := openStore(t, dsn)
			seed(t, st, 5)
			base := startNodes(t, 1, dsn, nodeOpts{mode: LockRedis, redis: srv, http: stack, wait: time.Second})[0]

			// Another node holds user 1's lock.
			client := redis.NewClient(&redis.Options{Addr: srv.Addr})
			defer client.Close()
			other := core.Must(core.New(client))
			defer other.Close()
			lease, err := other.Lock(context.Background(), OrderKey(1, testVoucher), core.WithTTL(20*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			code, out, h := do(t, http.MethodPost, base+"/voucher-order/seckill/1?user_id=1", nil)
			if code != 429 || h.Get("Retry-After") == "" {
				t.Fatalf("busy: %d %v Retry-After=%q, want 429 with Retry-After", code, out, h.Get("Retry-After"))
			}
			if err := lease.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}

			srv.Stop()
			code, out, _ = do(t, http.MethodPost, base+"/voucher-order/seckill/1?user_id=2", nil)
			if code != 503 {
				t.Fatalf("redis down: %d %v, want 503", code, out)
			}
			if msg, _ := out["error"].(string); strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "dial") {
				t.Fatalf("503 body leaks internal error text: %q", msg)
			}
			if r := report(t, st); r.Orders != 0 {
				t.Fatalf("%v: the handler ran without the lock", r)
			}
		})
	}
}
