package httplock_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/middleware/nethttp"
	"github.com/lockgate/lockgate/redistest"
)

// TestFailOpenOnlyWhenUnavailable: fail-open runs the handler without the
// lock for an unavailable Redis only. A closed Locker (core.ErrClosed)
// answers 503 and does not run the handler, fail-open or not; the control
// is the same route on a live Locker, which serves under the lock.
func TestFailOpenOnlyWhenUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	var logBuf locktest.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logBuf, nil))
	var ran, leased atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		if httplock.FromContext(r.Context()) != nil {
			leased.Add(1)
		}
	})
	live := newLocker(t, srv)
	closed := newLocker(t, srv)
	closed.Close()
	mux := http.NewServeMux()
	mux.Handle("POST /live/{voucher}", httplock.Must(httplock.New(live, "order:{path.voucher}", httplock.WithFailOpen(), httplock.WithLogger(logger)))(h))
	mux.Handle("POST /closed/{voucher}", httplock.Must(httplock.New(closed, "order:{path.voucher}", httplock.WithFailOpen(), httplock.WithLogger(logger)))(h))
	ts, _ := serve(t, mux)
	ctx := locktest.Context(t)

	if r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/live/7", "", ""); r.Err != nil || r.Status != 200 || ran.Load() != 1 || leased.Load() != 1 {
		t.Fatalf("control: %d %v, ran %d, under a lease %d; want 200 under the lock", r.Status, r.Err, ran.Load(), leased.Load())
	}
	r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/closed/7", "", "")
	if r.Err != nil || r.Status != http.StatusServiceUnavailable {
		t.Fatalf("closed Locker with fail-open: %d %v %s, want 503", r.Status, r.Err, r.Body)
	}
	if msg := locktest.ErrorText(t, r.Body); msg != "lock service unavailable" {
		t.Fatalf("503 text %q", msg)
	}
	if ran.Load() != 1 {
		t.Fatal("the handler ran without the lock on a closed Locker (fail-open must not apply)")
	}
	if logs := logBuf.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "locker closed") || strings.Contains(logs, "fail-open") {
		t.Fatalf("log %q, want the closed Locker at error and no fail-open", logs)
	}
}

// TestContextOutcomes: a request whose context ended before the lock
// answers for it: a passed deadline is 503 saying so, a cancellation 499,
// a cancellation whose cause is lockgate's (a lost lease) 503 — never 429,
// never the handler, fail-open on. Nothing is sent to Redis for them, so
// the answer must come from the context, not from Redis.
func TestContextOutcomes(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	var ran atomic.Int32
	mw := httplock.Must(httplock.New(l, "order:{path.voucher}", httplock.WithFailOpen(),
		httplock.WithLogger(slog.New(slog.DiscardHandler))))
	mux := http.NewServeMux()
	mux.Handle("POST /o/{voucher}", mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran.Add(1) })))
	cases := []struct {
		name   string
		ctx    func() context.Context
		status int
		text   string
	}{
		{"deadline passed", func() context.Context {
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			t.Cleanup(cancel)
			return ctx
		}, http.StatusServiceUnavailable, "the request's deadline passed while waiting for the lock"},
		{"cancelled", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, httplock.StatusClientClosedRequest, "client closed request"},
		{"cancelled by a lost lease", func() context.Context {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(core.ErrLockLost)
			return ctx
		}, http.StatusServiceUnavailable, "lock service unavailable"},
		{"control: live", context.Background, http.StatusOK, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := ran.Load()
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest("POST", "/o/7", nil).WithContext(c.ctx()))
			if rec.Code != c.status {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, c.status)
			}
			if c.status == http.StatusOK {
				if ran.Load() != before+1 {
					t.Fatal("control: the handler did not run")
				}
				return
			}
			if msg := locktest.ErrorText(t, rec.Body.String()); msg != c.text {
				t.Fatalf("text %q, want %q", msg, c.text)
			}
			if ran.Load() != before {
				t.Fatal("the handler ran")
			}
		})
	}
}

// TestReleaseAfterCancelledRequest: the handler's request context is
// cancelled (the client went away) before it returns; the release still
// deletes the lock key in Redis. The control: the key exists while the
// handler runs, after the cancellation.
func TestReleaseAfterCancelledRequest(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	rc := srv.Client(t)
	var logBuf locktest.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var heldInside atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel()
		<-r.Context().Done() // the lease's context, derived from the request's
		if n, err := rc.Exists(context.Background(), locktest.RedisKey("order:7")).Result(); err == nil {
			heldInside.Store(int32(n))
		}
	})
	mw := httplock.Must(httplock.New(l, "order:{path.voucher}", httplock.WithLogger(slog.New(slog.NewTextHandler(&logBuf, nil)))))
	mux := http.NewServeMux()
	mux.Handle("POST /o/{voucher}", mw(h))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", "/o/7", nil).WithContext(ctx)) // returns after the release
	if heldInside.Load() != 1 {
		t.Fatal("control: the lock key did not exist while the handler ran")
	}
	if locktest.Held(t, locktest.Context(t), rc, "order:7") {
		t.Fatal("the lock key still exists after the handler of a cancelled request returned")
	}
	if logs := logBuf.String(); strings.Contains(logs, "release failed") {
		t.Fatalf("release logged as failed: %q", logs)
	}
}

// TestRedisHung: Redis paused (SIGSTOP: connections open, no answer) with
// WithWait(200ms) answers 503 within the budget plus a bound — not 429, and
// not after the client's timeouts — and with fail-open runs the handler
// without the lock.
func TestRedisHung(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	var ran atomic.Int32
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran.Add(1) })
	quiet := httplock.WithLogger(slog.New(slog.DiscardHandler))
	mux := http.NewServeMux()
	mux.Handle("POST /closed/{voucher}", httplock.Must(httplock.New(l, "order:{path.voucher}", httplock.WithWait(200*time.Millisecond), quiet))(h))
	mux.Handle("POST /open/{voucher}", httplock.Must(httplock.New(l, "order:{path.voucher}", httplock.WithWait(200*time.Millisecond), httplock.WithFailOpen(), quiet))(h))
	ts, _ := serve(t, mux)
	ctx := locktest.Context(t)
	// Warm up: the server check and a connection are done before the pause.
	if r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/closed/1", "", ""); r.Status != 200 {
		t.Fatalf("warm-up: %d %v %s", r.Status, r.Err, r.Body)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Resume() }) // before the Locker closes (cleanups run last first)

	start := time.Now()
	r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/closed/7", "", "")
	took := time.Since(start)
	t.Logf("hung Redis, wait 200ms: %d after %v", r.Status, took)
	if r.Err != nil || r.Status != http.StatusServiceUnavailable {
		t.Fatalf("hung Redis: %d %v %s, want 503", r.Status, r.Err, r.Body)
	}
	if msg := locktest.ErrorText(t, r.Body); msg != "lock service unavailable" {
		t.Fatalf("503 text %q", msg)
	}
	if took < 200*time.Millisecond || took > 2*time.Second {
		t.Fatalf("answered after %v, want within the 200ms budget plus a bound (< 2s)", took)
	}
	start = time.Now()
	r = locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/open/8", "", "")
	took = time.Since(start)
	t.Logf("hung Redis, wait 200ms, fail-open: %d after %v", r.Status, took)
	if r.Err != nil || r.Status != http.StatusOK || ran.Load() != 2 || took > 2*time.Second {
		t.Fatalf("hung Redis, fail-open: %d %v after %v, ran %d; want 200 without the lock", r.Status, r.Err, took, ran.Load())
	}
}

// TestTypedPlaceholders: {query.user_id:int} and {path.voucher:uint} lock
// the canonical value, so user 01 / voucher 007 and user 1 / voucher 7 are
// one lock (the second is busy while the first is held), another user is
// not blocked (the control), and a value that does not parse is a 400
// naming the field.
func TestTypedPlaceholders(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	inside := make(chan string, 1)
	leave := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hold") != "" {
			inside <- httplock.FromContext(r.Context()).Key()
			<-leave
		}
		w.Write([]byte(httplock.FromContext(r.Context()).Key()))
	})
	mux := http.NewServeMux()
	mux.Handle("POST /seckill/{voucher}", httplock.Must(httplock.New(l, "order:{query.user_id:int}:{path.voucher:uint}", httplock.WithWait(core.NoWait)))(h))
	ts, _ := serve(t, mux)
	release := sync.OnceFunc(func() { close(leave) })
	t.Cleanup(release) // before the server's Close, which waits for the handler
	ctx := locktest.Context(t)

	first := make(chan locktest.Result, 1)
	go func() {
		first <- locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/seckill/007?user_id=01&hold=1", "", "")
	}()
	var key string
	select {
	case key = <-inside:
	case r := <-first:
		t.Fatalf("first request: %d %v %s", r.Status, r.Err, r.Body)
	}
	if key != "order:1:7" {
		t.Fatalf("key %q, want order:1:7", key)
	}
	for _, q := range []string{"/seckill/7?user_id=1", "/seckill/7?user_id=%2B1", "/seckill/0007?user_id=001"} {
		if r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+q, "", ""); r.Err != nil || r.Status != http.StatusTooManyRequests {
			t.Errorf("%s while order:1:7 is held: %d %v %s, want 429", q, r.Status, r.Err, r.Body)
		}
	}
	if r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/seckill/7?user_id=02", "", ""); r.Err != nil || r.Status != 200 || r.Body != "order:2:7" {
		t.Errorf("control, another user: %d %v %q, want 200 under order:2:7", r.Status, r.Err, r.Body)
	}
	for _, c := range []struct{ q, part string }{
		{"/seckill/7?user_id=x", "query.user_id"},
		{"/seckill/7?user_id=1.0", "query.user_id"},
		{"/seckill/-7?user_id=1", "path.voucher"},
	} {
		r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+c.q, "", "")
		if r.Err != nil || r.Status != http.StatusBadRequest {
			t.Errorf("%s: %d %v %s, want 400", c.q, r.Status, r.Err, r.Body)
			continue
		}
		if msg := locktest.ErrorText(t, r.Body); !strings.HasPrefix(msg, c.part+": invalid value") {
			t.Errorf("%s: text %q, want it to start with %q", c.q, msg, c.part+": invalid value")
		}
	}
	release()
	if r := <-first; r.Err != nil || r.Status != 200 || r.Body != "order:1:7" {
		t.Fatalf("first request: %d %v %q", r.Status, r.Err, r.Body)
	}
}
