package rpcsuite

import (
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
)

// limitWait is the wait of the limited rules: long enough for a fresh
// Locker's first attempt (its server check and script load) on a machine
// loaded by a whole CI run, short enough to be waited for.
const limitWait = time.Second

// limitRules are the Go rules of the limit cases: Order with a limit of 2
// and limitWait; Quick keeps its annotation (the lock of the same key
// template, a wait of 50ms), the control.
func limitRules(s *Server) {
	s.Rules = []Rule{{Method: "Order", Key: "order:{user_id}:{voucher_id}", Wait: limitWait, Limit: 2}}
}

// testLimit: a method with a limit of 2 (Rule.Limit) holds two calls of
// one key inside at once, each with a lease of that key; a third waits its
// budget and gets ResourceExhausted with a RetryInfo, its handler not run.
// A call of another key is served meanwhile, and once one of the two is
// released the next call of the key gets in. The control: on a method with
// the lock (no limit), the second call of a key held inside is
// ResourceExhausted, so two inside is the limit's doing.
func testLimit(t *testing.T, s Stack) {
	w := newWorld(t, s)
	w.Service.Holds = make(chan Held, 16)
	w.serve(t, limitRules)
	ctx := testCtx(t)
	async := func(method string, user string) <-chan Reply {
		c := make(chan Reply, 1)
		go func() { c <- w.call(ctx, method, req(user, 7, -3)) }()
		return c
	}
	enter := func(what, wantKey string, c <-chan Reply) Held {
		t.Helper()
		select {
		case h := <-w.Service.Holds:
			if h.Key != wantKey {
				t.Fatalf("%s: lease key %q, want %q", what, h.Key, wantKey)
			}
			return h
		case r := <-c:
			t.Fatalf("%s: %v, want it inside its handler", what, r)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not inside its handler within 10s", what)
		}
		return Held{}
	}
	answered := func(c <-chan Reply, what, wantKey string) {
		t.Helper()
		if r := wait(t, c); r.Code != OK || r.Key() != wantKey {
			t.Fatalf("%s: %v, want OK with the lease %s", what, r, wantKey)
		}
	}
	busy := func(method, user, what string, budget time.Duration) {
		t.Helper()
		start := time.Now()
		c := async(method, user)
		var r Reply
		select {
		case h := <-w.Service.Holds:
			h.Release()
			t.Fatalf("%s: entered its handler (lease %q), want ResourceExhausted", what, h.Key)
		case r = <-c:
		case <-time.After(budget + 10*time.Second):
			t.Fatalf("%s: no answer within %v", what, budget+10*time.Second)
		}
		if took := time.Since(start); r.Code != ResourceExhausted || !r.RetryInfo || r.RetryDelay <= 0 || took < budget {
			t.Fatalf("%s: %v after %v, want ResourceExhausted with a RetryInfo after its wait %v", what, r, took, budget)
		}
		if !strings.Contains(r.Message, FullMethod(method)) {
			t.Fatalf("%s: message %q does not name the method", what, r.Message)
		}
	}

	a1 := async("Order", "u1")
	in1 := enter("first call of the key", "order:u1:7", a1)
	a2 := async("Order", "u1")
	in2 := enter("second call of the key, the first inside", "order:u1:7", a2)
	busy("Order", "u1", "third call of the key, two inside", limitWait)
	if got := w.Service.Calls(); got != 2 {
		t.Fatalf("handler ran %d times, want 2 (the third must not run)", got)
	}

	// Another key is not limited by the two inside.
	b := async("Order", "u2")
	enter("a call of another key", "order:u2:7", b).Release()
	answered(b, "the call of another key", "order:u2:7")

	// The control: the lock lets one in, the second is busy.
	c1 := async("Quick", "u3")
	inC := enter("control: first call of the locked method", "order:u3:7", c1)
	busy("Quick", "u3", "control: second call of the locked method", 50*time.Millisecond)
	inC.Release()
	answered(c1, "control: first call of the locked method", "order:u3:7")

	// One released: the next call of the key gets in, beside the other.
	in1.Release()
	answered(a1, "first call of the key", "order:u1:7")
	a4 := async("Order", "u1")
	in4 := enter("the next call of the key, one released", "order:u1:7", a4)
	in2.Release()
	in4.Release()
	answered(a2, "second call of the key", "order:u1:7")
	answered(a4, "the next call of the key", "order:u1:7")
}

// testLimitAcrossServers: 30 calls of one key over two servers (two
// interceptors on two Lockers) of a method limited to 2, each with a long
// wait and holding 20ms (no time once 3 were inside), are all served,
// never more than 2 inside at once. The control:
// without the interceptor, three calls are inside at once, so the count
// can see the limit broken.
func testLimitAcrossServers(t *testing.T, s Stack) {
	const n = 30
	t.Run("limit 2", func(t *testing.T) {
		w := newWorld(t, s)
		// Each call holds 20ms, or no time once 3 were inside together.
		w.Service.Holds = make(chan Held, n)
		stop := make(chan struct{})
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case h := <-w.Service.Holds:
					if w.Service.MaxInside() >= 3 {
						h.Release()
					} else {
						time.AfterFunc(20*time.Millisecond, h.Release)
					}
				case <-stop:
					return
				}
			}
		}()
		defer func() { close(stop); <-stopped }()
		rules := []Rule{{Method: "Order", Key: "order:{user_id}:{voucher_id}", Wait: 45 * time.Second, Limit: 2}}
		w.serve(t, func(s *Server) { s.Rules = rules })
		other := w.stack.Serve(t, Server{Locker: locktestLocker(t, w), Service: w.Service, Served: w.record, Rules: rules})
		ctx := testCtx(t)
		replies := make(chan Reply, n)
		for i := range n {
			c := w.client
			if i%2 == 1 {
				c = other
			}
			go func() { replies <- c.Call(ctx, "Order", req("u1", 7, -3)) }()
		}
		for range n {
			if r := wait(t, replies); r.Code != OK {
				t.Fatalf("call: %v", r)
			}
		}
		if got := w.Service.MaxInside(); got > 2 {
			t.Fatalf("max calls inside at once = %d, want at most 2", got)
		}
		if got := w.Service.Calls(); got != n {
			t.Fatalf("handler ran %d times, want %d", got, n)
		}
		t.Logf("max inside %d", w.Service.MaxInside())
	})
	t.Run("control without interceptor", func(t *testing.T) {
		w := newWorld(t, s)
		w.Service.Holds = make(chan Held, 16)
		w.serveControl(t)
		ctx := testCtx(t)
		var calls []<-chan Reply
		for range 3 {
			c := make(chan Reply, 1)
			go func() { c <- w.call(ctx, "Order", req("u1", 7, -3)) }()
			calls = append(calls, c)
		}
		var held []Held
		for range 3 {
			select {
			case h := <-w.Service.Holds:
				held = append(held, h)
			case <-time.After(10 * time.Second):
				t.Fatalf("control: %d calls inside within 10s, want 3", len(held))
			}
		}
		if got := w.Service.MaxInside(); got < 3 {
			t.Fatalf("control: max inside = %d, want 3", got)
		}
		for _, h := range held {
			h.Release()
		}
		for _, c := range calls {
			if r := wait(t, c); r.Code != OK {
				t.Fatalf("control: %v", r)
			}
		}
	})
}

// locktestLocker is a second Locker on w's Redis, on a client of its own,
// with w's prefix (another server of the same service), closed at t's
// cleanup.
func locktestLocker(t *testing.T, w *world) *core.Locker {
	t.Helper()
	return locktest.Locker(t, w.Redis.Client(t), core.WithPrefix(w.Prefix))
}
