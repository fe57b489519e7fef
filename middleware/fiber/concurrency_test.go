package fiberlock_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/middleware/fiber"
	"github.com/lockgate/lockgate/redistest"
)

const burst = 50

// twoApps starts two instances of the seckill route, each with its own
// Locker and Redis client on srv; withLock false serves the handler bare.
func twoApps(t *testing.T, srv *redistest.Server, h fiber.Handler, withLock bool, cfg fiberlock.Config) []*app {
	t.Helper()
	var apps []*app
	for range 2 {
		f := newApp()
		if withLock {
			cfg.Locker = newLocker(t, srv)
			cfg.Key = "order:{query.user_id}:{path.voucher}"
			f.Post("/seckill/:voucher", fiberlock.New(cfg), h)
		} else {
			f.Post("/seckill/:voucher", h)
		}
		apps = append(apps, start(t, f))
	}
	return apps
}

func fire(t *testing.T, apps []*app, n int, userID func(i int) string) []locktest.Result {
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
			out[i] = apps[i%len(apps)].do(ctx, "POST", "/seckill/7?user_id="+userID(i), "", "")
		}()
	}
	close(start)
	wg.Wait()
	return out
}

func same(int) string { return "1" }

// TestOneAtATimeShortWait: 50 identical requests over two instances with a
// short wait: one handler inside at a time, the others 429 with Retry-After.
func TestOneAtATimeShortWait(t *testing.T) {
	srv := redistest.Start(t)
	g := newGauge()
	apps := twoApps(t, srv, g.handler(300*time.Millisecond), true, fiberlock.Config{Wait: 50 * time.Millisecond})
	var ok, busy int
	for _, r := range fire(t, apps, burst, same) {
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
			locktest.ErrorText(t, r.Body)
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

// TestOneAtATimeLongWait: with a long wait all 50 succeed, one after another.
func TestOneAtATimeLongWait(t *testing.T) {
	srv := redistest.Start(t)
	g := newGauge()
	apps := twoApps(t, srv, g.handler(5*time.Millisecond), true, fiberlock.Config{Wait: 45 * time.Second})
	for _, r := range fire(t, apps, burst, same) {
		if r.Err != nil || r.Status != http.StatusOK {
			t.Fatalf("request: %d %v %s", r.Status, r.Err, r.Body)
		}
	}
	if g.Max() != 1 || g.Ran() != burst {
		t.Fatalf("max inside %d (want 1), ran %d (want %d)", g.Max(), g.Ran(), burst)
	}
}

// TestControlWithoutLockOverlaps: the same load without the middleware has
// more than one handler inside at once, so the gauge can fail the tests
// above.
func TestControlWithoutLockOverlaps(t *testing.T) {
	srv := redistest.Start(t)
	g := newGauge()
	apps := twoApps(t, srv, g.handler(10*time.Second), false, fiberlock.Config{})
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
	apps := twoApps(t, srv, g.handler(10*time.Second), true, fiberlock.Config{Wait: core.NoWait})
	for _, r := range fire(t, apps, 10, strconv.Itoa) {
		if r.Err != nil || r.Status != http.StatusOK {
			t.Fatalf("request: %d %v %s", r.Status, r.Err, r.Body)
		}
	}
	if g.Max() < 2 {
		t.Fatalf("different keys: max inside %d, want >= 2", g.Max())
	}
}
