package httpsuite

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
)

// leaseCounter counts a handler's runs and those that had a lease.
type leaseCounter struct{ ran, leased atomic.Int32 }

func (c *leaseCounter) handler(_ context.Context, lease *core.Lease, _ Request) (int, string) {
	c.ran.Add(1)
	if lease != nil {
		c.leased.Add(1)
	}
	return http.StatusOK, "ok"
}

// redisDown: Redis stopped → 503 "lock service unavailable" and the
// handler does not run; with FailOpen the handler runs without a lease and
// a warning names the route's pattern, never the key (request data);
// CustomError replaces the 503's body, and the 400's.
func redisDown(t *testing.T, s Stack) {
	e := newEnv(t, s)
	l := e.locker()
	var logBuf locktest.SyncBuffer
	logger := textLogger(&logBuf)
	c := &leaseCounter{}
	const key = "order:{path.voucher}"
	base := e.serve(
		Route{Method: "POST", Path: "/closed/{voucher}", Locker: l, Key: key, Options: Options{Logger: logger}, Handler: c.handler},
		Route{Method: "POST", Path: "/open/{voucher}", Locker: l, Key: key, Options: Options{Logger: logger, FailOpen: true}, Handler: c.handler},
		Route{Method: "POST", Path: "/custom/{voucher}", Locker: l, Key: key, Options: Options{Logger: quiet(), CustomError: true}, Handler: c.handler},
		Route{Method: "POST", Path: "/custom400/{voucher}", Locker: l, Key: seckillKey, Options: Options{Logger: quiet(), CustomError: true}, Handler: c.handler},
	)
	e.srv.Stop()

	r := e.post(base + "/closed/7")
	if r.Err != nil || r.Status != http.StatusServiceUnavailable {
		t.Fatalf("fail closed: %d %v %s, want 503", r.Status, r.Err, r.Body)
	}
	if msg := errorText(t, r); msg != "lock service unavailable" {
		t.Fatalf("503 text %q leaks or differs", msg)
	}
	if r.RetryAfter != "1" {
		t.Fatalf("503 Retry-After %q, want 1 (a short pause)", r.RetryAfter)
	}
	if c.ran.Load() != 0 {
		t.Fatal("handler ran with Redis down (fail closed)")
	}
	if logs := logBuf.String(); strings.Contains(logs, "fail-open") {
		t.Fatalf("fail closed logged a fail-open: %q", logs)
	}

	r = e.post(base + "/open/7")
	if r.Err != nil || r.Status != http.StatusOK || c.ran.Load() != 1 || c.leased.Load() != 0 {
		t.Fatalf("fail open: %d %v %s, ran %d, with a lease %d; want 200 without a lease", r.Status, r.Err, r.Body, c.ran.Load(), c.leased.Load())
	}
	logs := logBuf.String()
	var line string
	for _, ln := range strings.Split(logs, "\n") {
		if strings.Contains(ln, "fail-open") {
			line = ln
		}
	}
	if line == "" {
		t.Fatalf("fail-open not logged: %q", logs)
	}
	if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "pattern="+key) {
		t.Fatalf("fail-open line %q, want a warning naming pattern=%s", line, key)
	}
	if strings.Contains(logs, "order:7") {
		t.Fatalf("the log carries the key (request data): %q", logs)
	}

	r = e.post(base + "/custom/7")
	if r.Err != nil || r.Status != http.StatusServiceUnavailable || r.Body != "custom error" {
		t.Fatalf("CustomError: %d %v %q, want 503 \"custom error\"", r.Status, r.Err, r.Body)
	}
	if r.RetryAfter != "1" {
		t.Fatalf("CustomError 503 Retry-After %q, want 1 (set before the replacement runs)", r.RetryAfter)
	}
	r = e.post(base + "/custom400/7")
	if r.Err != nil || r.Status != http.StatusBadRequest || r.Body != "custom error" {
		t.Fatalf("CustomError on bad input: %d %v %q, want 400 \"custom error\"", r.Status, r.Err, r.Body)
	}
	if r.RetryAfter != "" {
		t.Fatalf("400 has Retry-After %q: only 429 and 503 carry one", r.RetryAfter)
	}
	if c.ran.Load() != 1 {
		t.Fatalf("handler ran %d times, want once (fail-open)", c.ran.Load())
	}
}

// redisHung: Redis paused (SIGSTOP: connections open, no answer) with a
// 200ms wait answers 503 within the budget plus a bound — not 429, and not
// after the Redis client's timeouts — and with FailOpen runs the handler
// without the lock as fast.
func redisHung(t *testing.T, s Stack) {
	e := newEnv(t, s)
	l := e.locker()
	c := &leaseCounter{}
	const key = "order:{path.voucher}"
	wait := 200 * time.Millisecond
	base := e.serve(
		Route{Method: "POST", Path: "/closed/{voucher}", Locker: l, Key: key, Options: Options{Wait: wait, Logger: quiet()}, Handler: c.handler},
		Route{Method: "POST", Path: "/open/{voucher}", Locker: l, Key: key, Options: Options{Wait: wait, FailOpen: true, Logger: quiet()}, Handler: c.handler},
	)
	// Warm up: the server check and a connection are done before the pause.
	if r := e.post(base + "/closed/1"); r.Err != nil || r.Status != 200 {
		t.Fatalf("warm-up: %d %v %s", r.Status, r.Err, r.Body)
	}
	if err := e.srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.srv.Resume() }) // before the Locker closes (cleanups run last first)

	start := time.Now()
	r := e.post(base + "/closed/7")
	took := time.Since(start)
	t.Logf("hung Redis, wait %v: %d after %v", wait, r.Status, took)
	if r.Err != nil || r.Status != http.StatusServiceUnavailable {
		t.Fatalf("hung Redis: %d %v %s, want 503", r.Status, r.Err, r.Body)
	}
	if msg := errorText(t, r); msg != "lock service unavailable" {
		t.Fatalf("503 text %q", msg)
	}
	if took < wait || took > 2*time.Second {
		t.Fatalf("answered after %v, want within the %v budget plus a bound (< 2s)", took, wait)
	}
	start = time.Now()
	r = e.post(base + "/open/8")
	took = time.Since(start)
	t.Logf("hung Redis, wait %v, fail-open: %d after %v", wait, r.Status, took)
	if r.Err != nil || r.Status != http.StatusOK || took > 2*time.Second {
		t.Fatalf("hung Redis, fail-open: %d %v %s after %v; want 200 within 2s", r.Status, r.Err, r.Body, took)
	}
	if c.ran.Load() != 2 || c.leased.Load() != 1 {
		t.Fatalf("handler ran %d times, %d with a lease; want the warm-up under the lock and the fail-open run without", c.ran.Load(), c.leased.Load())
	}
}

// closedLocker: fail-open is for an unavailable Redis only. A closed
// Locker (core.ErrClosed) answers 503 and does not run the handler,
// FailOpen or not, and logs at error without a fail-open; the control is
// the same route on a live Locker, which serves under the lock.
func closedLocker(t *testing.T, s Stack) {
	e := newEnv(t, s)
	var logBuf locktest.SyncBuffer
	logger := textLogger(&logBuf)
	live := e.locker()
	closed := e.locker()
	closed.Close()
	c := &leaseCounter{}
	const key = "order:{path.voucher}"
	base := e.serve(
		Route{Method: "POST", Path: "/live/{voucher}", Locker: live, Key: key, Options: Options{FailOpen: true, Logger: logger}, Handler: c.handler},
		Route{Method: "POST", Path: "/closed/{voucher}", Locker: closed, Key: key, Options: Options{FailOpen: true, Logger: logger}, Handler: c.handler},
	)
	if r := e.post(base + "/live/7"); r.Err != nil || r.Status != 200 || c.ran.Load() != 1 || c.leased.Load() != 1 {
		t.Fatalf("control: %d %v, ran %d, under a lease %d; want 200 under the lock", r.Status, r.Err, c.ran.Load(), c.leased.Load())
	}
	r := e.post(base + "/closed/7")
	if r.Err != nil || r.Status != http.StatusServiceUnavailable {
		t.Fatalf("closed Locker with FailOpen: %d %v %s, want 503", r.Status, r.Err, r.Body)
	}
	if msg := errorText(t, r); msg != "lock service unavailable" {
		t.Fatalf("503 text %q", msg)
	}
	if c.ran.Load() != 1 {
		t.Fatal("the handler ran without the lock on a closed Locker (fail-open must not apply)")
	}
	if logs := logBuf.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "locker closed") || strings.Contains(logs, "fail-open") {
		t.Fatalf("log %q, want the closed Locker at error and no fail-open", logs)
	}
}
