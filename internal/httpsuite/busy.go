package httpsuite

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
)

// busy: a lock held elsewhere (another Locker, the default 30s TTL) answers
// 429 with Retry-After = core.RetryAfterSeconds of the busy error — the
// estimate of when the lock is likely free (the route's Locker's mean hold
// time, here ~1.1s → 2), not the holder's TTL nor a constant 1 — and a JSON
// text saying busy; the handler does not run. CustomBusy replaces the body
// (429 "custom busy") and the Retry-After header is still set. The
// control: once the other holder releases, the route serves 200.
func busy(t *testing.T, s Stack) {
	e := newEnv(t, s)
	l := e.locker()
	other := e.locker()
	// One hold of ~1.1s teaches the route's Locker its hold time.
	first, err := l.Lock(e.ctx, "warm-up")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the hold being measured, not a synchronisation
	if err := first.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	held, err := other.Lock(e.ctx, "order:1:7")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.Background())
	_, busyErr := l.TryLock(e.ctx, "order:1:7")
	secs := core.RetryAfterSeconds(busyErr)
	want := strconv.Itoa(secs)
	// 2 for a hold of 1.1s; more if the machine is slow, never the TTL's 30.
	if !errors.Is(busyErr, core.ErrNotObtained) || secs < 2 || secs > 10 {
		t.Fatalf("direct TryLock: %v, Retry-After %s, want busy and 2", busyErr, want)
	}

	c := &counter{}
	base := e.serve(
		Route{Method: "POST", Path: "/a/{voucher}", Locker: l, Key: seckillKey, Options: Options{Wait: core.NoWait}, Handler: c.handler},
		Route{Method: "POST", Path: "/b/{voucher}", Locker: l, Key: seckillKey, Options: Options{Wait: core.NoWait, CustomBusy: true}, Handler: c.handler},
	)
	r := e.post(base + "/a/7?user_id=1")
	if r.Err != nil || r.Status != http.StatusTooManyRequests || r.RetryAfter != want {
		t.Fatalf("got %d %v Retry-After %q, want 429 and %s: %s", r.Status, r.Err, r.RetryAfter, want, r.Body)
	}
	if msg := errorText(t, r); !strings.Contains(msg, "busy") {
		t.Fatalf("busy text %q", msg)
	}
	r = e.post(base + "/b/7?user_id=1")
	if r.Err != nil || r.Status != http.StatusTooManyRequests || r.Body != "custom busy" || r.RetryAfter != want {
		t.Fatalf("CustomBusy: %d %v %q, Retry-After %q; want 429 \"custom busy\" and Retry-After %s", r.Status, r.Err, r.Body, r.RetryAfter, want)
	}
	if c.n() != 0 {
		t.Fatal("handler ran while the lock was busy")
	}

	if err := held.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a/7?user_id=1", "/b/7?user_id=1"} {
		if r := e.post(base + p); r.Err != nil || r.Status != 200 || r.RetryAfter != "" {
			t.Fatalf("control %s, the lock free: %d %v %s (Retry-After %q), want 200", p, r.Status, r.Err, r.Body, r.RetryAfter)
		}
	}
}
