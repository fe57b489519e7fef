package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockgate/lockgate/example/seckill"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// rawUser is the user id of the metrics tests' orders: distinctive, so
// that finding it in /metrics or a span means request data leaked there.
const rawUser = "90817263"

// serveProc is one `seckill serve` child process of a test.
type serveProc struct {
	url            string
	db             string // its SQLite file
	stdout, stderr *locktest.SyncBuffer
}

// startServeProc runs `seckill serve` as a separate process (this test
// binary, see TestMain) with -lock redis on redisURL, gRPC off, a free
// HTTP port and a fresh SQLite file with voucher 1 in stock, plus args,
// and waits until it answers /healthz. Stdout and stderr are kept apart.
// At the end of the test it is stopped with SIGTERM and must exit 0.
func startServeProc(t *testing.T, redisURL string, args ...string) *serveProc {
	t.Helper()
	db := filepath.Join(t.TempDir(), "seckill.db")
	st, err := seckill.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	err = st.Seed(context.Background(), 1, 1000)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	for try := 0; ; try++ {
		port, err := redistest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		p := &serveProc{url: "http://127.0.0.1:" + strconv.Itoa(port), db: db, stdout: &locktest.SyncBuffer{}, stderr: &locktest.SyncBuffer{}}
		cmd := seckillCmd(context.Background(), t, append([]string{"serve", "-addr", "127.0.0.1:" + strconv.Itoa(port),
			"-grpc-addr", "", "-db", db, "-lock", "redis", "-redis", redisURL}, args...)...)
		cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		var waitErr error
		go func() { waitErr = cmd.Wait(); close(exited) }()
		stop := func() error {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-exited
				return errors.New("serve did not stop within 10s of SIGTERM")
			}
			return waitErr
		}
		err = waitHealthy(p.url, exited)
		if err == nil {
			t.Cleanup(func() {
				if err := stop(); err != nil {
					t.Errorf("serve: %v\nstderr:\n%s", err, tailOf(p.stderr.String()))
				}
			})
			return p
		}
		stop()
		if try == 2 || !strings.Contains(p.stderr.String(), "address already in use") {
			t.Fatalf("serve %v: %v\nstderr:\n%s", args, err, tailOf(p.stderr.String()))
		}
	}
}

func waitHealthy(url string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(startBudget)
	for time.Now().Before(deadline) {
		if resp, err := client.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("exited before answering /healthz")
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("no answer on /healthz within %v", startBudget)
}

// testClient sends no keep-alive requests: nothing is left open when the
// test ends (goleak).
func testClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

// order POSTs an order of user for voucher 1 and returns the status.
func (p *serveProc) order(t *testing.T, c *http.Client, user string) int {
	t.Helper()
	resp, err := c.Post(p.url+"/voucher-order/seckill/1?user_id="+user, "", nil)
	if err != nil {
		t.Error(err)
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// orders sends the test's orders: rawUser twice at once (one waits for the
// other's lock, or is turned away busy), then two other users.
func (p *serveProc) orders(t *testing.T, c *http.Client) {
	t.Helper()
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Add(1)
		go func() { defer wg.Done(); codes[i] = p.order(t, c, rawUser) }()
	}
	wg.Wait()
	ok, refused := 0, 0
	for _, c := range codes {
		switch c {
		case http.StatusOK:
			ok++
		case http.StatusBadRequest, http.StatusTooManyRequests: // already purchased, busy
			refused++
		}
	}
	if ok != 1 || refused != 1 {
		t.Errorf("two concurrent orders of user %s: statuses %v, want one 200 and one 400 or 429", rawUser, codes)
	}
	for _, u := range []string{"11", "12"} {
		if code := p.order(t, c, u); code != http.StatusOK {
			t.Errorf("order of user %s: status %d, want 200", u, code)
		}
	}
}

// TestServeMetrics: `seckill serve -lock redis` (a real process, every
// HTTP stack) serves GET /metrics in the Prometheus text format. After orders
// (one user twice at once, two others) the acquire-duration histogram is
// there for the order route's key template with outcome "acquired", its
// count covers every order's Lock call, and no line carries the user id
// of the requests (the key is never a label). Without -trace-stdout
// nothing is written to stdout: no span is exported.
func TestServeMetrics(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, stack := range stacks {
		t.Run(stack, func(t *testing.T) {
			p := startServeProc(t, srv.URL(), "-http", stack)
			c := testClient()
			p.orders(t, c)

			resp, err := c.Get(p.url + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /metrics: %s\n%s", resp.Status, body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") || !strings.Contains(ct, "version=0.0.4") {
				t.Errorf("Content-Type %q, want the Prometheus text format (text/plain; version=0.0.4)", ct)
			}
			pattern := `pattern="` + seckill.OrderKeyTemplate + `"`
			found := false
			for _, line := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(line, metricAcquire+"_bucket{") && strings.Contains(line, pattern) && strings.Contains(line, `outcome="acquired"`) {
					found = true
				}
				if strings.Contains(line, rawUser) {
					t.Errorf("/metrics carries the user id %s: %s", rawUser, line)
				}
			}
			if !found {
				t.Errorf("/metrics has no %s_bucket with %s and outcome=\"acquired\":\n%s", metricAcquire, pattern, body)
			}
			var s lockStats
			if err := s.add(bytes.NewReader(body)); err != nil {
				t.Fatalf("parse /metrics: %v", err)
			}
			if s.acquires != 4 || s.hits < 3 {
				t.Errorf("acquires %v (hits %v), want 4 Lock calls, at least 3 of them holding", s.acquires, s.hits)
			}
			if out := p.stdout.String(); out != "" {
				t.Errorf("serve without -trace-stdout wrote to stdout:\n%s", tailOf(out))
			}
		})
	}
}

// TestServeTraceStdout: with -trace-stdout (every HTTP stack), an order
// sent with a W3C traceparent is written to serve's stdout (the
// stdouttrace JSON, one object a line) as two spans of the caller's
// trace: the order's server span "POST <route>", child of the caller's
// span, and its lock's span "lock <key template>", child of the server
// span, outcome acquired. Nothing on stdout carries the user id. serve
// still exits 0 on SIGTERM (the tracer provider shuts down).
func TestServeTraceStdout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	// The route as each stack spells it.
	routes := map[string]string{}
	for _, stack := range stacks {
		routes[stack] = "POST /voucher-order/seckill/:voucher_id"
	}
	routes[seckill.StackNetHTTP] = "POST /voucher-order/seckill/{voucher_id}"
	routes[seckill.StackChi] = "POST /voucher-order/seckill/{voucher_id}"
	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, stack := range stacks {
		t.Run(stack, func(t *testing.T) {
			p := startServeProc(t, srv.URL(), "-trace-stdout", "-http", stack)
			req, _ := http.NewRequest(http.MethodPost, p.url+"/voucher-order/seckill/1?user_id="+rawUser, nil)
			req.Header.Set("traceparent", "00-"+traceID+"-"+callerSpan+"-01")
			resp, err := testClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("order: %s, want 200", resp.Status)
			}
			lockName := "lock " + seckill.OrderKeyTemplate
			var lock, server *stdoutSpan
			wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = p.stdout.Wait(wctx, func(out string) bool { // both spans are written
				for _, s := range readSpans(out) {
					switch s.Name {
					case lockName:
						lock = &s
					case routes[stack]:
						server = &s
					}
				}
				return lock != nil && server != nil
			})
			if err != nil {
				t.Fatalf("no spans %q and %q on stdout within 5s; stdout:\n%s\nstderr:\n%s",
					lockName, routes[stack], tailOf(p.stdout.String()), tailOf(p.stderr.String()))
			}
			if got := lock.attr("lockgate.outcome"); got != "acquired" {
				t.Errorf("lock span: lockgate.outcome %q, want acquired", got)
			}
			if lock.SpanContext.TraceID != traceID || server.SpanContext.TraceID != traceID {
				t.Errorf("trace ids: lock %s, server %s; want the caller's %s", lock.SpanContext.TraceID, server.SpanContext.TraceID, traceID)
			}
			if lock.Parent.SpanID != server.SpanContext.SpanID || server.Parent.SpanID != callerSpan {
				t.Errorf("parents: lock's %s (want the server span %s), server's %s (want the caller's %s)",
					lock.Parent.SpanID, server.SpanContext.SpanID, server.Parent.SpanID, callerSpan)
			}
			if got := server.attr("http.response.status_code"); got != "200" {
				t.Errorf("server span: http.response.status_code %q, want 200", got)
			}
			if out := p.stdout.String(); strings.Contains(out, rawUser) {
				t.Errorf("stdout carries the user id %s:\n%s", rawUser, tailOf(out))
			}
		})
	}
}

// stdoutSpan is the part of stdouttrace's JSON the tests read.
type stdoutSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Attributes  []struct {
		Key   string
		Value struct{ Value any }
	}
}

func (s stdoutSpan) attr(key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return fmt.Sprint(a.Value.Value)
		}
	}
	return ""
}

// readSpans decodes the complete span lines of out.
func readSpans(out string) []stdoutSpan {
	var spans []stdoutSpan
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s stdoutSpan
		if json.Unmarshal(sc.Bytes(), &s) == nil && s.Name != "" {
			spans = append(spans, s)
		}
	}
	return spans
}

// Two nodes' /metrics as the OpenTelemetry Prometheus exporter writes
// them (buckets cut to 1ms, 10ms, 100ms), and a third node with no
// lockgate metric (as in -lock local). Summed over the nodes:
//
//	acquire buckets (cumulative, all outcomes):
//	  le=0.001: 2 (A acquired) + 0 (A busy) + 2 (B reentered) + 0 (B acquired) = 4
//	  le=0.01:  6 + 0 + 2 + 4 = 12
//	  le=0.1:   8 + 1 + 2 + 6 = 17
//	  le=+Inf:  8 + 2 + 2 + 6 = 18 (the acquires)
//	hits: acquired 8 + 6, reentered 2 = 16 of 18 = 88.9%
//	p50: rank 0.5×18 = 9, in (0.001, 0.01] holding 12-4 = 8, 5 into it:
//	     0.001 + 0.009×5/8 = 0.006625 s
//	p90: rank 16.2, in (0.01, 0.1] holding 5, 4.2 into it:
//	     0.01 + 0.09×4.2/5 = 0.0856 s
//	p99: rank 17.82 > 17, in the +Inf bucket: the largest finite bound, 0.1 s
//	p10: rank 1.8, in the first bucket, from 0: 0.001×1.8/4 = 0.00045 s
//	renewals: ok 9 + 5 of 9 + 1 (failed) + 5 + 1 (lost) = 14 of 16 = 87.5%
const (
	metricsNodeA = `# HELP lockgate_lock_acquire_duration_seconds Time spent in Lock and TryLock, by pattern and outcome.
# TYPE lockgate_lock_acquire_duration_seconds histogram
lockgate_lock_acquire_duration_seconds_bucket{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="acquired",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="0.001"} 2
lockgate_lock_acquire_duration_seconds_bucket{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="acquired",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="0.01"} 6
lockgate_lock_acquire_duration_seconds_bucket{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="acquired",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="0.1"} 8
lockgate_lock_acquire_duration_seconds_bucket{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="acquired",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="+Inf"} 8
lockgate_lock_acquire_duration_seconds_sum{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="acquired",pattern="order:{query.user_id:int}:{path.voucher_id:int}"} 0.04
lockgate_lock_acquire_duration_seconds_count{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="acquired",pattern="order:{query.user_id:int}:{path.voucher_id:int}"} 8
lockgate_lock_acquire_duration_seconds_bucket{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="busy",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="0.001"} 0
lockgate_lock_acquire_duration_seconds_bucket{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="busy",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="0.01"} 0
lockgate_lock_acquire_duration_seconds_bucket{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="busy",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="0.1"} 1
lockgate_lock_acquire_duration_seconds_bucket{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="busy",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="+Inf"} 2
lockgate_lock_acquire_duration_seconds_sum{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="busy",pattern="order:{query.user_id:int}:{path.voucher_id:int}"} 2.05
lockgate_lock_acquire_duration_seconds_count{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="busy",pattern="order:{query.user_id:int}:{path.voucher_id:int}"} 2
# HELP lockgate_lock_releases_total Releases sent to Redis, by pattern and outcome (ok, not_held, failed).
# TYPE lockgate_lock_releases_total counter
lockgate_lock_releases_total{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="ok",pattern="order:{query.user_id:int}:{path.voucher_id:int}"} 8
# HELP lockgate_lock_renewals_total Watchdog renewals, by pattern and outcome (ok, failed, lost).
# TYPE lockgate_lock_renewals_total counter
lockgate_lock_renewals_total{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="ok",pattern="order:{query.user_id:int}:{path.voucher_id:int}"} 9
lockgate_lock_renewals_total{otel_scope_name="github.com/lockgate/lockgate/otel",outcome="failed",pattern="order:{query.user_id:int}:{path.voucher_id:int}"} 1
# HELP target_info Target metadata
# TYPE target_info gauge
target_info{service_name="seckill"} 1
`
	metricsNodeB = `# TYPE lockgate_lock_acquire_duration_seconds histogram
lockgate_lock_acquire_duration_seconds_bucket{outcome="reentered",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="0.001"} 2
lockgate_lock_acquire_duration_seconds_bucket{outcome="reentered",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="0.01"} 2
lockgate_lock_acquire_duration_seconds_bucket{outcome="reentered",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="0.1"} 2
lockgate_lock_acquire_duration_seconds_bucket{outcome="reentered",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="+Inf"} 2
lockgate_lock_acquire_duration_seconds_sum{outcome="reentered",pattern="order:{query.user_id:int}:{path.voucher_id:int}"} 0
lockgate_lock_acquire_duration_seconds_count{outcome="reentered",pattern="order:{query.user_id:int}:{path.voucher_id:int}"} 2
lockgate_lock_acquire_duration_seconds_bucket{outcome="acquired",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="0.001"} 0
lockgate_lock_acquire_duration_seconds_bucket{outcome="acquired",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="0.01"} 4
lockgate_lock_acquire_duration_seconds_bucket{outcome="acquired",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="0.1"} 6
lockgate_lock_acquire_duration_seconds_bucket{outcome="acquired",pattern="order:{query.user_id:int}:{path.voucher_id:int}",le="+Inf"} 6
lockgate_lock_acquire_duration_seconds_sum{outcome="acquired",pattern="order:{query.user_id:int}:{path.voucher_id:int}"} 0.2
lockgate_lock_acquire_duration_seconds_count{outcome="acquired",pattern="order:{query.user_id:int}:{path.voucher_id:int}"} 6
# TYPE lockgate_lock_renewals_total counter
lockgate_lock_renewals_total{outcome="ok",pattern="order:{query.user_id:int}:{path.voucher_id:int}"} 5
lockgate_lock_renewals_total{outcome="lost",pattern="order:{query.user_id:int}:{path.voucher_id:int}"} 1
`
	// metricsNoLock is a -lock local node: no lockgate metric at all.
	metricsNoLock = `# HELP target_info Target metadata
# TYPE target_info gauge
target_info{service_name="seckill",telemetry_sdk_language="go"} 1
`
)

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

// TestLockStats: the demo's lock figures from fixed /metrics texts, worked
// out by hand above; and the controls: no lockgate metric (a -lock local
// node) and no renewal give n/a, not 0% or a division by zero.
func TestLockStats(t *testing.T) {
	var s lockStats
	for _, text := range []string{metricsNodeA, metricsNodeB, metricsNoLock} {
		if err := s.add(strings.NewReader(text)); err != nil {
			t.Fatal(err)
		}
	}
	if s.acquires != 18 || s.hits != 16 {
		t.Errorf("acquires %v hits %v, want 18 and 16", s.acquires, s.hits)
	}
	for _, c := range []struct {
		q, want float64
	}{{0.5, 0.006625}, {0.9, 0.0856}, {0.99, 0.1}, {0.1, 0.00045}} {
		if got := s.waitQuantile(c.q); !near(got, c.want) {
			t.Errorf("wait p%v = %v, want %v", c.q*100, got, c.want)
		}
	}
	for _, c := range []struct{ name, got, want string }{
		{"hit rate", fmtPercent(s.hitRate()), "88.9%"},
		{"wait p50", fmtSeconds(s.waitQuantile(0.5)), "6.6ms"},
		{"wait p99", fmtSeconds(s.waitQuantile(0.99)), "100.0ms"},
		{"renewal success", fmtPercent(s.renewalRate()), "87.5%"},
		{"acquires", fmtCount(s.acquires, s.cum != nil), "18"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}

	// Control: acquires but no renewal (short handlers, long TTL: the
	// demo's usual case) → renewal success n/a, the rest as before.
	var noRenew lockStats
	if err := noRenew.add(strings.NewReader(metricsNodeA[:strings.Index(metricsNodeA, "# HELP lockgate_lock_renewals_total")])); err != nil {
		t.Fatal(err)
	}
	if got := fmtPercent(noRenew.renewalRate()); got != "n/a" {
		t.Errorf("renewal success without renewals: %q, want n/a", got)
	}
	if got := fmtPercent(noRenew.hitRate()); got != "80.0%" { // 8 of 10
		t.Errorf("hit rate of node A alone: %q, want 80.0%%", got)
	}

	// Control: three -lock local nodes, no lockgate metric → every figure n/a.
	var local lockStats
	for range 3 {
		if err := local.add(strings.NewReader(metricsNoLock)); err != nil {
			t.Fatal(err)
		}
	}
	for name, got := range map[string]string{
		"acquires":        fmtCount(local.acquires, local.cum != nil),
		"hit rate":        fmtPercent(local.hitRate()),
		"wait p50":        fmtSeconds(local.waitQuantile(0.5)),
		"wait p99":        fmtSeconds(local.waitQuantile(0.99)),
		"renewal success": fmtPercent(local.renewalRate()),
	} {
		if got != "n/a" {
			t.Errorf("no lockgate metric: %s %q, want n/a", name, got)
		}
	}

	// A text that is not the Prometheus format is an error, not zeros.
	if err := new(lockStats).add(strings.NewReader("lockgate_lock_renewals_total{outcome=\"ok\" 3\n")); err == nil {
		t.Error("a malformed text parsed without error")
	}
}

// TestBucketQuantile: histogram_quantile's edge rules on one histogram.
func TestBucketQuantile(t *testing.T) {
	bounds := []float64{0.5, 1, 2, math.Inf(+1)}
	counts := []float64{0, 4, 4, 8}
	for _, c := range []struct {
		q, want float64
	}{
		{0.25, 0.75}, // rank 2 of the 4 in (0.5, 1]: halfway
		{0.5, 1},     // rank 4: the top of (0.5, 1]
		{0.75, 2},    // rank 6: in +Inf → the largest finite bound
	} {
		if got := bucketQuantile(c.q, bounds, counts); !near(got, c.want) {
			t.Errorf("q=%v: %v, want %v", c.q, got, c.want)
		}
	}
	if got := bucketQuantile(0.5, bounds, []float64{0, 0, 0, 0}); !math.IsNaN(got) {
		t.Errorf("no observations: %v, want NaN", got)
	}
	if got := bucketQuantile(0.5, []float64{1, 2}, []float64{1, 2}); !math.IsNaN(got) {
		t.Errorf("no +Inf bucket: %v, want NaN", got)
	}
}
