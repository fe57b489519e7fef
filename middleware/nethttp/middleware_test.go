package httplock_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/keyfunc"
	"github.com/lockgate/lockgate/middleware/nethttp"
	"github.com/lockgate/lockgate/redistest"
)

// TestBadInput: key errors answer 400 naming the part, a body over the bound
// 413; the handler does not run and nothing is locked. Then valid requests
// show the JSON and form bodies intact for the handler.
func TestBadInput(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	var ran atomic.Int32
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		if r.URL.Path == "/form" {
			w.Write([]byte(r.PostFormValue("sku") + "|" + r.PostFormValue("n")))
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /seckill/{voucher}", httplock.Must(httplock.New(l, "order:{query.user_id}:{path.voucher}"))(echo))
	mux.Handle("POST /body", httplock.Must(httplock.New(l, "order:{body.user.id}", httplock.WithMaxBodySize(1024)))(echo))
	mux.Handle("POST /form", httplock.Must(httplock.New(l, "sku:{form.sku}"))(echo))
	mux.Handle("POST /header", httplock.Must(httplock.New(l, "u:{header.X-User-ID}"))(echo))
	ts, _ := serve(t, mux)
	ctx := locktest.Context(t)
	const jsonCT = "application/json"
	bad := []struct {
		name, path, ctype, body string
		status                  int
		part, reason            string
	}{
		{"missing query", "/seckill/7", "", "", 400, "query.user_id", "missing"},
		{"empty query", "/seckill/7?user_id=", "", "", 400, "query.user_id", "missing"},
		{"oversized value", "/seckill/7?user_id=" + strings.Repeat("9", keyfunc.DefaultMaxValueLen+1), "", "", 400, "query.user_id", "too long"},
		{"control character", "/seckill/7?user_id=a%0Ab", "", "", 400, "query.user_id", "invalid value"},
		{"control character in path", "/seckill/a%01b?user_id=1", "", "", 400, "path.voucher", "invalid value"},
		{"missing body field", "/body", jsonCT, `{"user":{}}`, 400, "body.user.id", "missing"},
		{"body not JSON", "/body", jsonCT, `{"user":`, 400, "body.user.id", "invalid value"},
		{"body field an object", "/body", jsonCT, `{"user":{"id":{}}}`, 400, "body.user.id", "invalid value"},
		{"oversized body", "/body", jsonCT, `{"user":{"id":1},"pad":"` + strings.Repeat("x", 2048) + `"}`, 413, "", "too large"},
		{"missing form field", "/form", "application/x-www-form-urlencoded", "n=1", 400, "form.sku", "missing"},
		{"missing header", "/header", "", "", 400, "header.X-User-ID", "missing"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+c.path, c.ctype, c.body)
			if r.Err != nil || r.Status != c.status {
				t.Fatalf("status %d (%v), want %d: %s", r.Status, r.Err, c.status, r.Body)
			}
			msg := locktest.ErrorText(t, r.Body)
			if !strings.Contains(msg, c.part) || !strings.Contains(msg, c.reason) {
				t.Fatalf("error %q, want it to name %q and %q", msg, c.part, c.reason)
			}
			if strings.Contains(msg, "keyfunc") {
				t.Fatalf("error %q carries the package name", msg)
			}
		})
	}
	if ran.Load() != 0 {
		t.Fatalf("handler ran %d times on bad input", ran.Load())
	}
	if n, err := srv.Client(t).DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("redis holds %d keys after bad input (%v), want 0", n, err)
	}

	t.Run("JSON body intact", func(t *testing.T) {
		body := `{"user": {"id": 42, "name": "Zoë"}, "qty": 1.50}`
		r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/body", jsonCT, body)
		if r.Err != nil || r.Status != 200 || r.Body != body {
			t.Fatalf("got %d %v %q, want the body echoed", r.Status, r.Err, r.Body)
		}
	})
	t.Run("form body intact", func(t *testing.T) {
		form := url.Values{"sku": {"a:b"}, "n": {"3"}}.Encode()
		r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/form", "application/x-www-form-urlencoded", form)
		if r.Err != nil || r.Status != 200 || r.Body != "a:b|3" {
			t.Fatalf("got %d %v %q", r.Status, r.Err, r.Body)
		}
	})
}

// TestLeaseInHandler: the handler's r.Context() is the lease's Context,
// FromContext returns the lease, nested locking re-enters, and {ctx.*}
// reads what earlier middleware stored.
func TestLeaseInHandler(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	type seen struct {
		key       string
		fence     int64
		same      bool
		reentered bool
		err       error
	}
	got := make(chan seen, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lease := httplock.FromContext(r.Context())
		s := seen{key: lease.Key(), fence: lease.Fence(), same: r.Context() == lease.Context()}
		inner, err := l.Lock(r.Context(), lease.Key(), core.WithWait(core.NoWait))
		if err == nil {
			s.reentered = inner.Reentrant()
			err = inner.Unlock(r.Context())
		}
		s.err = err
		got <- s
	})
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(keyfunc.WithValue(r.Context(), "user", 42)))
		})
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v/{voucher}", auth(httplock.Must(httplock.New(l, "order:{ctx.user}:{voucher}"))(h)))
	ts, _ := serve(t, mux)
	r := locktest.Do(locktest.Context(t), ts.Client(), "POST", ts.URL+"/v/a:b", "", "")
	if r.Err != nil || r.Status != 200 {
		t.Fatalf("status %d %v", r.Status, r.Err)
	}
	s := <-got
	if s.key != "order:42:a%3Ab" || s.fence <= 0 || !s.same || !s.reentered || s.err != nil {
		t.Fatalf("handler saw %+v", s)
	}
}

// TestPathValueOption: a pluggable path lookup for other routers.
func TestPathValueOption(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	keys := make(chan string, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { keys <- httplock.FromContext(r.Context()).Key() })
	chiLike := func(r *http.Request, name string) string {
		if name == "voucher" {
			return strings.TrimPrefix(r.URL.Path, "/v/")
		}
		return ""
	}
	ts, _ := serve(t, httplock.Must(httplock.New(l, "v:{path.voucher}", httplock.WithPathValue(chiLike)))(h))
	if r := locktest.Do(locktest.Context(t), ts.Client(), "GET", ts.URL+"/v/abc", "", ""); r.Err != nil || r.Status != 200 {
		t.Fatalf("status %d %v", r.Status, r.Err)
	}
	if k := <-keys; k != "v:abc" {
		t.Fatalf("key %q", k)
	}
}

// TestBusy: 429 with Retry-After = core.RetryAfterSeconds of the busy
// error — the estimate of when the lock is likely free (this Locker's mean
// hold time, here ~1.1s → 2), not the holder's 30s TTL — and the busy
// handler override, which sees the header already set.
func TestBusy(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	ctx := locktest.Context(t)
	// One hold of ~1.1s teaches the Locker its hold time.
	first, err := l.Lock(ctx, "warm-up")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the hold being measured, not a synchronisation
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	held, err := l.Lock(ctx, "order:1:7") // default TTL 30s
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.Background())
	_, busyErr := l.TryLock(ctx, "order:1:7")
	want := strconv.Itoa(core.RetryAfterSeconds(busyErr))
	if !errors.Is(busyErr, core.ErrNotObtained) || want != "2" {
		t.Fatalf("direct TryLock: %v, Retry-After %s, want busy and 2", busyErr, want)
	}

	var ran atomic.Int32
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran.Add(1) })
	custom := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Retry-After", w.Header().Get("Retry-After"))
		w.WriteHeader(http.StatusConflict)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /a/{voucher}", httplock.Must(httplock.New(l, "order:{query.user_id}:{path.voucher}", httplock.WithWait(core.NoWait)))(h))
	mux.Handle("POST /b/{voucher}", httplock.Must(httplock.New(l, "order:{query.user_id}:{path.voucher}",
		httplock.WithWait(20*time.Millisecond), httplock.WithBusyHandler(custom)))(h))
	ts, _ := serve(t, mux)

	r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/a/7?user_id=1", "", "")
	if r.Status != http.StatusTooManyRequests || r.RetryAfter != want {
		t.Fatalf("got %d Retry-After %q, want 429 and %s", r.Status, r.RetryAfter, want)
	}
	if msg := locktest.ErrorText(t, r.Body); !strings.Contains(msg, "busy") {
		t.Fatalf("busy text %q", msg)
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/b/7?user_id=1", nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("X-Seen-Retry-After") != want {
		t.Fatalf("override: %d, Retry-After seen %q, want %s", resp.StatusCode, resp.Header.Get("X-Seen-Retry-After"), want)
	}
	if ran.Load() != 0 {
		t.Fatal("handler ran while the lock was busy")
	}
}

// TestPanicReleases: a panicking handler releases the lock (the next
// request obtains it with no wait at all) and net/http still handles the
// panic (logs it and drops the connection).
func TestPanicReleases(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	var calls atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			panic("boom in handler")
		}
	})
	mux := http.NewServeMux()
	mux.Handle("POST /seckill/{voucher}", httplock.Must(httplock.New(l, "order:{query.user_id}:{path.voucher}", httplock.WithWait(core.NoWait)))(h))
	ts, errLog := serve(t, mux)
	ctx := locktest.Context(t)
	if r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/seckill/7?user_id=1", "", ""); r.Err == nil {
		t.Fatalf("panicking request answered %d, want the connection dropped", r.Status)
	}
	if !strings.Contains(errLog.String(), "boom in handler") {
		t.Fatalf("server log %q does not show the panic", errLog.String())
	}
	if locktest.Held(t, ctx, srv.Client(t), "order:1:7") {
		t.Fatal("lock key still exists after the panic")
	}
	if r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/seckill/7?user_id=1", "", ""); r.Err != nil || r.Status != 200 {
		t.Fatalf("next request: %d %v %s, want 200 at once", r.Status, r.Err, r.Body)
	}
}

// TestRedisDown: Redis stopped → 503 and the handler does not run; with
// WithFailOpen the handler runs without a lease and a warning is logged.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	var ran atomic.Int32
	var leaseSeen atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		leaseSeen.Store(httplock.FromContext(r.Context()) != nil)
	})
	var logBuf locktest.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logBuf, nil))
	mux := http.NewServeMux()
	mux.Handle("POST /closed/{voucher}", httplock.Must(httplock.New(l, "order:{path.voucher}", httplock.WithLogger(logger)))(h))
	mux.Handle("POST /open/{voucher}", httplock.Must(httplock.New(l, "order:{path.voucher}", httplock.WithFailOpen(), httplock.WithLogger(logger)))(h))
	ts, _ := serve(t, mux)
	ctx := locktest.Context(t)
	srv.Stop()

	r := locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/closed/7", "", "")
	if r.Err != nil || r.Status != http.StatusServiceUnavailable {
		t.Fatalf("fail closed: %d %v, want 503", r.Status, r.Err)
	}
	if msg := locktest.ErrorText(t, r.Body); msg != "lock service unavailable" {
		t.Fatalf("503 text %q leaks or differs", msg)
	}
	if ran.Load() != 0 {
		t.Fatal("handler ran with Redis down (fail closed)")
	}
	r = locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/open/7", "", "")
	if r.Err != nil || r.Status != http.StatusOK || ran.Load() != 1 || leaseSeen.Load() {
		t.Fatalf("fail open: %d %v, ran %d, lease seen %v", r.Status, r.Err, ran.Load(), leaseSeen.Load())
	}
	if !strings.Contains(logBuf.String(), "fail-open") {
		t.Fatalf("fail-open not logged: %q", logBuf.String())
	}
	// The log names the route's pattern, not the key (request data).
	if log := logBuf.String(); !strings.Contains(log, "pattern=order:{path.voucher}") || strings.Contains(log, "order:7") {
		t.Fatalf("fail-open log should carry the pattern and never the key: %q", log)
	}
}

// TestLockLost: the lock key deleted behind a running handler's back → the
// handler's context is cancelled with cause core.ErrLockLost.
func TestLockLost(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	inside := make(chan string, 1)
	causes := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside <- httplock.FromContext(r.Context()).Key()
		select {
		case <-r.Context().Done():
			causes <- context.Cause(r.Context())
		case <-time.After(10 * time.Second):
			causes <- errors.New("handler context not cancelled within 10s")
		}
	})
	mux := http.NewServeMux()
	mux.Handle("POST /seckill/{voucher}", httplock.Must(httplock.New(l, "order:{path.voucher}",
		httplock.WithTTL(300*time.Millisecond), httplock.WithLogger(slog.New(slog.DiscardHandler))))(h))
	ts, _ := serve(t, mux)
	ctx := locktest.Context(t)
	done := make(chan locktest.Result, 1)
	go func() { done <- locktest.Do(ctx, ts.Client(), "POST", ts.URL+"/seckill/7", "", "") }()
	key := <-inside
	if err := srv.Client(t).Del(ctx, core.DefaultPrefix+"{"+key+"}").Err(); err != nil {
		t.Fatal(err)
	}
	if cause := <-causes; !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("cause %v, want core.ErrLockLost", cause)
	}
	if r := <-done; r.Err != nil {
		t.Fatal(r.Err)
	}
}
