package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/example/seckill"
)

// stacks are the HTTP stacks of `seckill serve -http`, every one tested.
var stacks = seckill.Stacks

// onFasthttp reports whether stack is served by fasthttp (the Fiber
// stacks) rather than net/http.
func onFasthttp(stack string) bool { return strings.HasPrefix(stack, "fiber") }

// testNode is one HTTP node started as `seckill serve` starts it.
type testNode struct {
	addr  string
	store *seckill.Store
	flags *serveFlags
}

// startServe starts the HTTP API as `seckill serve args...` does: the
// flags parsed by serveFlagSet (their defaults unless args say otherwise)
// make the Config, and serveHTTP serves it on a loopback listener — the
// code of serve itself. The lock mode is none (no Redis needed) on a fresh
// SQLite file with voucher 1 in stock. Everything stops with the test.
func startServe(t *testing.T, args ...string) testNode {
	t.Helper()
	fs, f := serveFlagSet()
	fs.SetOutput(io.Discard)
	if err := parse(fs, append([]string{"-lock", "none"}, args...)); err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
	if err := f.checkTimeouts(); err != nil {
		t.Fatal(err)
	}
	st, err := seckill.Open(context.Background(), filepath.Join(t.TempDir(), "seckill.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Seed(context.Background(), 1, 1000); err != nil {
		t.Fatal(err)
	}
	mode, err := seckill.ParseLockMode(f.lock)
	if err != nil {
		t.Fatal(err)
	}
	cfg := seckill.Config{Service: &seckill.Service{Store: st}, Mode: mode, Wait: f.wait, TTL: f.ttl, Timeouts: f.timeouts}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	stop, err := serveHTTP(cfg, f.httpImpl, ln, errc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := stop(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		select {
		case err := <-errc:
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the server did not stop within 10s of its shutdown")
		}
	})
	return testNode{addr: ln.Addr().String(), store: st, flags: f}
}

// dribble writes msg to c one byte every gap, from now, until it is all
// sent or a write fails (the server hung up); it returns how many bytes
// went out.
func dribble(c net.Conn, msg string, gap time.Duration, stop <-chan struct{}) <-chan int {
	sent := make(chan int, 1)
	go func() {
		n := 0
		defer func() { sent <- n }()
		tick := time.NewTicker(gap)
		defer tick.Stop()
		for i := 0; i < len(msg); i++ {
			if i > 0 {
				select {
				case <-tick.C:
				case <-stop:
					return
				}
			}
			if _, err := c.Write([]byte{msg[i]}); err != nil {
				return
			}
			n++
		}
	}()
	return sent
}

// TestSlowClientsCutOff: a slowloris client — a request header sent one
// byte every 300ms (about 40s for the whole header), or a fast header
// followed by its body at the same pace — is disconnected by the server
// within the header timeout (2s) or the request timeout (5s) of `seckill
// serve`'s defaults, long before its bytes are all sent. Before, Fiber
// (no timeout) kept the header connection for as long as the client
// liked, and net/http bounded only the header (5s). Each stack, as serve
// starts it. Measured: Fiber (v2 and v3) answers 408 and hangs up after
// 2s (header) or 3s after a fast header (the body gets the request timeout
// minus the header timeout); net/http (nethttp, chi, gin, echo, echov5)
// answers 400 after 2s (header) or 5s (body).
// The control: the same request sent at once is served.
func TestSlowClientsCutOff(t *testing.T) {
	const gap = 300 * time.Millisecond
	header := "POST /voucher-order/seckill/1?user_id=%d HTTP/1.1\r\nHost: seckill\r\nUser-Agent: slowloris\r\n" +
		"X-Padding: " + strings.Repeat("z", 40) + "\r\nContent-Length: %d\r\n\r\n"
	for _, stack := range stacks {
		for _, phase := range []string{"header", "body"} {
			t.Run(stack+"/"+phase, func(t *testing.T) {
				t.Parallel()
				n := startServe(t, "-http", stack)
				body := strings.Repeat("b", 100)
				req := fmt.Sprintf(header, 1, len(body)) + body
				limit := n.flags.timeouts.ReadHeader // the header timeout
				slow, fast := req, ""
				if phase == "body" {
					limit = n.flags.timeouts.Read // the whole request
					fast = fmt.Sprintf(header, 1, len(body))
					slow = body
				}
				c, err := net.Dial("tcp", n.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := io.WriteString(c, fast); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				stop := make(chan struct{})
				defer close(stop)
				sent := dribble(c, slow, gap, stop)
				c.SetReadDeadline(time.Now().Add(30 * time.Second))
				answer, err := io.ReadAll(c) // until the server hangs up
				took := time.Since(start)
				first, _, _ := strings.Cut(string(answer), "\r\n")
				t.Logf("%s, slow %s: disconnected after %v (read: %v), answer %q", stack, phase, took.Round(10*time.Millisecond), err, first)
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("still connected after %v: the %s was never cut off", took, phase)
				}
				if max := limit + time.Second; took > max {
					t.Fatalf("disconnected after %v, want within the timeout %v (+1s)", took, limit)
				}
				if full := time.Duration(len(slow)-1) * gap; took > full/2 {
					t.Fatalf("disconnected after %v: not well before the %d bytes were sent (%v)", took, len(slow), full)
				}
				c.Close()
				if got := <-sent; got >= len(slow) {
					t.Fatalf("all %d bytes were sent before the cut", got)
				}
				if first != "" && !strings.Contains(first, " 408 ") && !strings.Contains(first, " 400 ") {
					t.Fatalf("answer %q before hanging up, want 408, 400 or none", first)
				}
				if r, _ := n.store.Report(context.Background(), 1); r.Orders != 0 {
					t.Fatalf("the slow request placed an order: %v", r)
				}

				// The control: the same request at once is served.
				c2, err := net.Dial("tcp", n.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c2.Close()
				if _, err := io.WriteString(c2, fmt.Sprintf(header, 2, len(body))+body); err != nil {
					t.Fatal(err)
				}
				c2.SetReadDeadline(time.Now().Add(10 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("control: %v %v, want 200", resp, err)
				}
				resp.Body.Close()
			})
		}
	}
}

// TestIdleConnectionClosed: a keep-alive connection left idle after a
// request is closed after -idle-timeout (1s here), on every stack.
func TestIdleConnectionClosed(t *testing.T) {
	for _, stack := range stacks {
		t.Run(stack, func(t *testing.T) {
			t.Parallel()
			n := startServe(t, "-http", stack, "-idle-timeout", "1s")
			c, err := net.Dial("tcp", n.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: seckill\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 || resp.Close {
				t.Fatalf("first request: %v %v, want a 200 that keeps the connection", resp, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			start := time.Now()
			rest, err := io.ReadAll(br)
			took := time.Since(start)
			if ne, ok := err.(net.Error); (ok && ne.Timeout()) || len(rest) != 0 || took > 3*time.Second {
				t.Fatalf("idle connection: %v after %v, read %q; want closed after about 1s", err, took, rest)
			}
			t.Logf("%s: idle connection closed after %v", stack, took.Round(10*time.Millisecond))
		})
	}
}

// TestAmbiguousFraming: a request whose body length can be read two ways
// — Content-Length with Transfer-Encoding: chunked (either order), two
// different Content-Length headers (either order), a Transfer-Encoding
// other than chunked — is refused, the connection is closed after the
// one answer, and the order request smuggled after it in the same bytes
// is never served (no order of user 2; the refused request placed none
// either). Each stack as serve starts it:
//
//   - Fiber (v2 and v3, on fasthttp v1.69): fasthttp refuses two
//     Content-Length headers and a Transfer-Encoding other than chunked
//     itself, but reads chunked with a Content-Length as chunked and
//     takes "Content-Length : N" for no length, serving the smuggled
//     request (v1.51 took the last Content-Length and read any
//     Transfer-Encoding as chunked); the app's first handler
//     (fiberFraming) answers 400 to every case.
//   - net/http: 400 from net/http itself for differing Content-Length
//     headers and a space before a colon, 501 for a Transfer-Encoding other
//     than chunked; chunked with a Content-Length it accepted as chunked
//     and then served what followed, now httpFraming answers 400 to any
//     chunked request.
//
// The control: two well-framed requests pipelined on one connection are
// both served, so the reading below does see a second request when there
// is one. The Fiber stacks answer as Fiber, the net/http stacks (chi,
// gin, echo and echov5 too: httpFraming wraps each) as net/http.
func TestAmbiguousFraming(t *testing.T) {
	const smuggled = "POST /voucher-order/seckill/1?user_id=2 HTTP/1.1\r\nHost: seckill\r\nContent-Length: 0\r\n\r\n"
	line := "POST /voucher-order/seckill/1?user_id=1 HTTP/1.1\r\nHost: seckill\r\n"
	n := len(smuggled)
	cases := []struct {
		name, req         string
		fasthttp, nethttp int // the status on each server
	}{
		{"Content-Length then Transfer-Encoding",
			line + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
			400, 400},
		{"Transfer-Encoding then Content-Length",
			line + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + smuggled,
			400, 400},
		{"two Content-Length, the last 0",
			line + fmt.Sprintf("Content-Length: %d\r\nContent-Length: 0\r\n\r\n", n) + smuggled,
			400, 400},
		{"two Content-Length, the first 0",
			line + fmt.Sprintf("Content-Length: 0\r\nContent-Length: %d\r\n\r\n", n) + smuggled,
			400, 400},
		{"Transfer-Encoding gzip",
			line + "Transfer-Encoding: gzip\r\n\r\n0\r\n\r\n" + smuggled,
			400, 501},
		{"Transfer-Encoding chunked alone",
			line + "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
			400, 400},
		// fasthttp v1.69 does not take it as the length: it reads no
		// body and served the smuggled request (v1.51 refused it).
		{"a space before the colon of Content-Length",
			line + fmt.Sprintf("Content-Length : %d\r\n\r\n", n) + smuggled,
			400, 400},
	}
	for _, stack := range stacks {
		t.Run(stack, func(t *testing.T) {
			t.Parallel()
			node := startServe(t, "-http", stack)
			// exchange sends raw and reads every answer until the server
			// hangs up (or 3s of silence). No answer may quote the request
			// back (fasthttp's parse errors do, with its raw bytes).
			exchange := func(raw string) []*http.Response {
				c, err := net.Dial("tcp", node.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := io.WriteString(c, raw); err != nil {
					t.Fatal(err)
				}
				br := bufio.NewReader(c)
				var out []*http.Response
				for {
					c.SetReadDeadline(time.Now().Add(3 * time.Second))
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						return out
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if strings.Contains(string(body), "seckill") || strings.Contains(string(body), "HTTP/1.1") {
						t.Errorf("%d answer quotes the request: %s", resp.StatusCode, body)
					}
					out = append(out, resp)
				}
			}
			for _, c := range cases {
				want := c.nethttp
				if onFasthttp(stack) {
					want = c.fasthttp
				}
				got := exchange(c.req)
				var statuses []int
				for _, r := range got {
					statuses = append(statuses, r.StatusCode)
				}
				t.Logf("%s, %s: answers %v", stack, c.name, statuses)
				if len(got) != 1 || got[0].StatusCode != want {
					t.Errorf("%s: answers %v, want exactly one, %d, and the connection closed", c.name, statuses, want)
				}
			}
			for _, user := range []int64{1, 2} {
				if k, err := node.store.CountOrders(context.Background(), user, 1); err != nil || k != 0 {
					t.Fatalf("user %d has %d orders (%v): a refused or smuggled request was served", user, k, err)
				}
			}
			// The control.
			pipelined := strings.ReplaceAll(smuggled, "user_id=2", "user_id=3") + strings.ReplaceAll(smuggled, "user_id=2", "user_id=4")
			if got := exchange(pipelined); len(got) != 2 || got[0].StatusCode != 200 || got[1].StatusCode != 200 {
				t.Fatalf("control: %d answers, want two 200s", len(got))
			}
		})
	}
}
