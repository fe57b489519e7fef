package httplock_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/middleware/nethttp"
	"github.com/lockgate/lockgate/redistest"
)

const burst = 50

// twoApps starts two instances of the seckill route, each with its own
// Locker and Redis client on srv; withLock false serves the handler bare.
func twoApps(t *testing.T, srv *redistest.Server, h http.Handler, withLock bool, opts ...httplock.Option) []*httptest.Server {
	t.Helper()
	var apps []*httptest.Server
	for range 2 {
		mux := http.NewServeMux()
		route := h
		if withLock {
			l := newLocker(t, srv)
			route = httplock.Must(httplock.New(l, "order:{query.user_id}:{path.voucher}", opts...))(h)
		}
		mux.Handle("POST /seckill/{voucher}", route)
		ts, _ := serve(t, mux)
		apps = append(apps, ts)
	}
	return apps
}

// fire sends n concurrent requests, alternating between apps; userID(i)
// gives each request's user.
func fire(t *testing.T, apps []*httptest.Server, n int, userID func(i int) string) []locktest.Result {
	t.Helper()
	ctx := locktest.Context(t)
	out := make([]locktest.Result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			app := apps[i%len(apps)]
			out[i] = locktest.Do(ctx, app.Client(), "POST", app.URL+"/seckill/7?user_id="+userID(i), "", "")
		}()
	}
	close(start)
	wg.Wait()
	return out
}

func same(int) string { return "1" }

// TestOneAtATimeShortWait: 50 identical requests over two instances with a
// short wait: one handler inside at a time, the others answered 429 with
// Retry-After.
func TestOneAtATimeShortWait(t *testing.T) {
	srv := redistest.Start(t)
	g := newGauge()
	apps := twoApps(t, srv, g.handler(300*time.Millisecond), true, httplock.WithWait(50*time.Millisecond))
	res := fire(t, apps, burst, same)
	var ok, busy int
	for _, r := range res {
		switch {
		case r.Err != nil:
			t.Fatalf("request failed: %v", r.Err)
		case r.Status == http.StatusOK:
			ok++
		case r.Status == http.StatusTooManyRequests:
			busy++
			s, err := strconv.Atoi(r.RetryAfter)
			if err != nil || s < 1 || s > int(core.DefaultTTL/time.Second) {
				t.Fatalf("429 with Retry-After %q", r.RetryAfter)
			}
			if msg := locktest.ErrorText(t, r.Body); msg == "" {
				t.Fatal("empty error")
			}
		default:
			t.Fatalf("unexpected status %d: %s", r.Status, r.Body)
		}
	}
	if g.Max() != 1 {
		t.Fatalf("max handlers inside at once = %d, want 1", g.Max())
	}
	if ok < 1 || busy < 1 || int(g.Ran()) != ok {
		t.Fatalf("%d ok, %d busy, handler ran %d times", ok, busy, g.Ran())
	}
	t.Logf("%d ok, %d busy (429)", ok, busy)
}

// TestOneAtATimeLongWait: with a long wait all 50 succeed, one after
// another.
func TestOneAtATimeLongWait(t *testing.T) {
	srv := redistest.Start(t)
	g := newGauge()
	apps := twoApps(t, srv, g.handler(5*time.Millisecond), true, httplock.WithWait(45*time.Second))
	for _, r := range fire(t, apps, burst, same) {
		if r.Err != nil || r.Status != http.StatusOK {
			t.Fatalf("request: %d %v %s", r.Status, r.Err, r.Body)
		}
	}
	if g.Max() != 1 || g.Ran() != burst {
		t.Fatalf("max inside %d (want 1), ran %d (want %d)", g.Max(), g.Ran(), burst)
	}
}

// TestControlWithoutLockOverlaps is the control of the two tests above: the
// same load on the same handler without the middleware has more than one
// handler inside at once, so the gauge can see an overlap.
func TestControlWithoutLockOverlaps(t *testing.T) {
	srv := redistest.Start(t)
	g := newGauge()
	apps := twoApps(t, srv, g.handler(10*time.Second), false)
	for _, r := range fire(t, apps, burst, same) {
		if r.Err != nil || r.Status != http.StatusOK {
			t.Fatalf("request: %d %v", r.Status, r.Err)
		}
	}
	if g.Max() < 2 {
		t.Fatalf("control: max inside %d, want >= 2", g.Max())
	}
}

// TestDifferentKeysOverlap: requests with different keys never wait for
// each other.
func TestDifferentKeysOverlap(t *testing.T) {
	srv := redistest.Start(t)
	g := newGauge()
	apps := twoApps(t, srv, g.handler(10*time.Second), true, httplock.WithWait(core.NoWait))
	for _, r := range fire(t, apps, 10, strconv.Itoa) {
		if r.Err != nil || r.Status != http.StatusOK {
			t.Fatalf("request: %d %v %s", r.Status, r.Err, r.Body)
		}
	}
	if g.Max() < 2 {
		t.Fatalf("different keys: max inside %d, want >= 2", g.Max())
	}
}
