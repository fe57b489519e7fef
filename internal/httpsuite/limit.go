package httpsuite

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
)

// inside is one request whose handler has entered: the key of its lease,
// and release, which lets it answer.
type inside struct {
	key     string
	release func()
}

// holder is a handler that tells the case of every request that enters
// (entered) and then holds it until the case releases it (or the case's
// gate opens at cleanup), answering 200 with its lease's key.
type holder struct {
	entered chan inside
	gate    *gate
	ran     atomic.Int32
}

func (e *env) holder() *holder {
	return &holder{entered: make(chan inside, 64), gate: e.gate()}
}

func (h *holder) handler(_ context.Context, lease *core.Lease, _ Request) (int, string) {
	h.ran.Add(1)
	if lease == nil {
		return http.StatusInternalServerError, "no lease"
	}
	done := make(chan struct{})
	var once sync.Once
	h.entered <- inside{key: lease.Key(), release: func() { once.Do(func() { close(done) }) }}
	select {
	case <-done:
	case <-h.gate.c:
	}
	return http.StatusOK, lease.Key()
}

// async sends a POST to url and returns its answer when it comes.
func (e *env) async(url string) <-chan locktest.Result {
	c := make(chan locktest.Result, 1)
	go func() { c <- e.post(url) }()
	return c
}

// limitWait is the wait budget of the limited routes: long enough for a
// fresh Locker's first attempt (its server check and script load) on a
// machine loaded by a whole CI run, short enough to be waited for twice.
const limitWait = time.Second

// limit: a route with a limit of 2 (Options.Limit) holds two requests of
// one key inside at once, each with a lease of that key; a third waits its
// budget and is answered 429 with a Retry-After in [1, the TTL], its
// handler not run. A request of another key is served meanwhile, and once
// one of the two is released the next request of the key gets in. The
// control: on a route with the lock (no limit), the second request of a
// key held inside is answered 429, so two inside is the limit's doing.
func limit(t *testing.T, s Stack) {
	e := newEnv(t, s)
	l := e.locker()
	h := e.holder()
	base := e.serve(
		Route{Method: "POST", Path: "/limit/{voucher}", Locker: l, Key: seckillKey, Options: Options{Limit: 2, Wait: limitWait}, Handler: h.handler},
		Route{Method: "POST", Path: "/lock/{voucher}", Locker: l, Key: seckillKey, Options: Options{Wait: limitWait}, Handler: h.handler},
	)
	const key1 = "/limit/7?user_id=1"
	// enter waits for the request that c answers to enter its handler; an
	// answer first (a 503 on a loaded machine, say) fails with that answer.
	enter := func(c <-chan locktest.Result, what, wantKey string) inside {
		t.Helper()
		var in inside
		select {
		case in = <-h.entered:
		case r := <-c:
			t.Fatalf("%s: answered %d %v %q without entering its handler", what, r.Status, r.Err, r.Body)
		case <-time.After(bound):
			t.Fatalf("%s: nothing within %v", what, bound)
		}
		if in.key != wantKey {
			t.Fatalf("%s: lease key %q, want %q", what, in.key, wantKey)
		}
		return in
	}
	answered := func(c <-chan locktest.Result, what, wantBody string) {
		t.Helper()
		r := recv(t, c, what)
		if r.Err != nil || r.Status != http.StatusOK || r.Body != wantBody {
			t.Fatalf("%s: %d %v %q, want 200 %q", what, r.Status, r.Err, r.Body, wantBody)
		}
	}
	busyWithin := func(url, what string) {
		t.Helper()
		start := time.Now()
		c := e.async(url)
		var r locktest.Result
		select {
		case in := <-h.entered:
			in.release()
			t.Fatalf("%s: entered its handler (lease %q), want 429", what, in.key)
		case r = <-c:
		case <-time.After(limitWait + bound):
			t.Fatalf("%s: no answer within %v", what, limitWait+bound)
		}
		took := time.Since(start)
		if r.Err != nil || r.Status != http.StatusTooManyRequests {
			t.Fatalf("%s: %d %v %s, want 429", what, r.Status, r.Err, r.Body)
		}
		if sec, err := strconv.Atoi(r.RetryAfter); err != nil || sec < 1 || sec > int(core.DefaultTTL/time.Second) {
			t.Fatalf("%s: 429 with Retry-After %q, want whole seconds in [1, %v]", what, r.RetryAfter, core.DefaultTTL)
		}
		if took < limitWait {
			t.Fatalf("%s: answered after %v, before its wait budget %v ended", what, took, limitWait)
		}
		errorText(t, r)
	}

	a1 := e.async(base + key1)
	in1 := enter(a1, "first request of the key", "order:1:7")
	a2 := e.async(base + key1)
	in2 := enter(a2, "second request of the key, the first inside", "order:1:7")
	busyWithin(base+key1, "third request of the key, two inside")
	if n := h.ran.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2 (the third must not run)", n)
	}

	// Another key is not limited by the two inside.
	b := e.async(base + "/limit/7?user_id=2")
	enter(b, "a request of another key", "order:2:7").release()
	answered(b, "the request of another key", "order:2:7")

	// The control: the lock lets one in, the second is busy.
	c1 := e.async(base + "/lock/7?user_id=3")
	inC := enter(c1, "control: first request on the locked route", "order:3:7")
	busyWithin(base+"/lock/7?user_id=3", "control: second request on the locked route")
	inC.release()
	answered(c1, "control: first request on the locked route", "order:3:7")

	// One released: the next of the key gets in, beside the other.
	in1.release()
	answered(a1, "first request of the key", "order:1:7")
	a4 := e.async(base + key1)
	in4 := enter(a4, "the next request of the key, one released", "order:1:7")
	in2.release()
	in4.release()
	answered(a2, "second request of the key", "order:1:7")
	answered(a4, "the next request of the key", "order:1:7")
}

// crowd counts the handlers inside at once; reached is closed the first
// time want are inside together.
type crowd struct {
	in, max, ran atomic.Int32
	want         int32
	once         sync.Once
	reached      chan struct{}
}

// handler enters, works until want handlers are inside together or work
// passes, and answers 200.
func (c *crowd) handler(work time.Duration) Handler {
	return func(context.Context, *core.Lease, Request) (int, string) {
		c.ran.Add(1)
		n := c.in.Add(1)
		defer c.in.Add(-1)
		for m := c.max.Load(); n > m && !c.max.CompareAndSwap(m, n); m = c.max.Load() {
		}
		if n >= c.want {
			c.once.Do(func() { close(c.reached) })
		}
		timer := time.NewTimer(work)
		defer timer.Stop()
		select {
		case <-c.reached:
		case <-timer.C:
		}
		return http.StatusOK, "ok"
	}
}

// limitAcrossInstances: 30 requests of one key over two instances of a
// route limited to 2, each with a long wait, are all served, never more
// than 2 inside at once. The control: the same load without the
// middleware has 3 inside at once, so the count can see the limit broken.
func limitAcrossInstances(t *testing.T, s Stack) {
	const n = 30
	run := func(t *testing.T, bare bool, work time.Duration) *crowd {
		e := newEnv(t, s)
		c := &crowd{want: 3, reached: make(chan struct{})}
		bases := e.twoInstances(c.handler(work), bare, Options{Limit: 2, Wait: 45 * time.Second})
		for _, r := range e.fire(bases, n, same) {
			if r.Err != nil || r.Status != http.StatusOK {
				t.Fatalf("request: %d %v %s", r.Status, r.Err, r.Body)
			}
		}
		if c.ran.Load() != n {
			t.Fatalf("handler ran %d times, want %d", c.ran.Load(), n)
		}
		return c
	}
	t.Run("limit 2", func(t *testing.T) {
		c := run(t, false, 20*time.Millisecond)
		if m := c.max.Load(); m > 2 {
			t.Fatalf("max handlers inside at once = %d, want at most 2", m)
		}
		t.Logf("max inside %d", c.max.Load())
	})
	t.Run("control: without the middleware", func(t *testing.T) {
		if c := run(t, true, 10*time.Second); c.max.Load() < 3 {
			t.Fatalf("control: max inside %d, want >= 3 (does Serve honour Route.Bare, and serve requests concurrently?)", c.max.Load())
		}
	})
}
