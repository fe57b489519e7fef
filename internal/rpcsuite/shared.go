package rpcsuite

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// sharedKey is the key template of the shared cases' rules, the one Order
// and Quick are annotated with.
const sharedKey = "order:{user_id}:{voucher_id}"

// sharedWait is the wait of the shared cases' rules whose calls are to get
// in: long enough never to run out on a loaded machine.
const sharedWait = 10 * time.Second

// sharedRules: Order (the readers) shared; Relaxed (a writer with a long
// wait) and Plain (the control) exclusive, all with sharedWait and the
// same key template; Quick keeps its annotation, the lock of that template
// with a wait of 50ms (the busy writer).
func sharedRules(s *Server) {
	s.Rules = []Rule{
		{Method: "Order", Key: sharedKey, Wait: sharedWait, Shared: true},
		{Method: "Relaxed", Key: sharedKey, Wait: sharedWait},
		{Method: "Plain", Key: sharedKey, Wait: sharedWait},
	}
}

// waitingEvent matches the n-th (from 1) request of the lock named key
// queued behind its holders, a reader's (RLock) when read, else a
// writer's. It keeps count: use one per Events.Wait.
func waitingEvent(n int, key string, read bool) func(core.Event) bool {
	seen := 0
	return func(e core.Event) bool {
		if e.Kind == core.EventWaiting && e.Key == key && e.Read == read {
			seen++
		}
		return seen == n
	}
}

// testShared: a method with Rule.Shared takes its key's lock shared. Two
// of its calls of one key are inside at once (the second enters while the
// first still holds, each held until both are in). A method locking the
// same key exclusively (the writer) is busy meanwhile: ResourceExhausted
// with a RetryInfo after its wait, its handler not run. A writer with a
// long wait queues, a read that comes after it queues behind it although
// reads are inside, the writer enters once they leave and the later read
// only after the writer: the writer is not starved. The control: the same
// pair of calls on a method without Shared does not overlap — the second
// queues (its waiting event) and enters only once the first is released.
func testShared(t *testing.T, s Stack) {
	var events locktest.Events
	w := newWorld(t, s, core.WithObserver(&events))
	w.Service.Holds = make(chan Held, 16)
	w.serve(t, sharedRules)
	ctx := testCtx(t)
	async := func(method, user string) <-chan Reply {
		c := make(chan Reply, 1)
		go func() { c <- w.call(ctx, method, req(user, 7, -3)) }()
		return c
	}
	enter := func(what, wantMethod, wantKey string) Held {
		t.Helper()
		select {
		case h := <-w.Service.Holds:
			if h.Method != wantMethod || h.Key != wantKey {
				h.Release()
				t.Fatalf("%s: %s entered with the lease %q, want %s with %q", what, h.Method, h.Key, wantMethod, wantKey)
			}
			return h
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not inside its handler within 10s", what)
		}
		return Held{}
	}
	notInside := func(what string) {
		t.Helper()
		select {
		case h := <-w.Service.Holds:
			h.Release()
			t.Fatalf("%s: %s entered its handler (lease %q)", what, h.Method, h.Key)
		default:
		}
	}
	answered := func(c <-chan Reply, what, wantKey string) {
		t.Helper()
		if r := wait(t, c); r.Code != OK || r.Key() != wantKey {
			t.Fatalf("%s: %v, want OK with the lease %s", what, r, wantKey)
		}
	}
	queued := func(match func(core.Event) bool, what string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, ok := events.Wait(wctx, match); !ok {
			t.Fatalf("%s: not waiting in the lock's queue within 10s", what)
		}
	}

	// Two reads of one key inside at once.
	r1 := async("Order", "u1")
	in1 := enter("first read", "Order", "order:u1:7")
	r2 := async("Order", "u1")
	in2 := enter("second read, the first inside", "Order", "order:u1:7")

	// The writer of the key is busy while they are inside.
	start := time.Now()
	r := w.call(ctx, "Quick", req("u1", 7, -3))
	if took := time.Since(start); r.Code != ResourceExhausted || !r.RetryInfo || r.RetryDelay <= 0 || took < 50*time.Millisecond {
		t.Fatalf("writer, reads inside: %v after %v, want ResourceExhausted with a RetryInfo after its wait 50ms", r, took)
	}
	if !strings.Contains(r.Message, FullMethod("Quick")) {
		t.Fatalf("writer, reads inside: message %q does not name the method", r.Message)
	}
	notInside("writer, reads inside")

	// A waiting writer is not overtaken by a read that comes after it.
	wa := async("Relaxed", "u1")
	queued(waitingEvent(2, "order:u1:7", false), "writer with a long wait, reads inside") // the first was Quick's
	r3 := async("Order", "u1")
	queued(waitingEvent(1, "order:u1:7", true), "read after the waiting writer")
	notInside("read after the waiting writer, before the reads left")
	in1.Release()
	in2.Release()
	answered(r1, "first read", "order:u1:7")
	answered(r2, "second read", "order:u1:7")
	inW := enter("the waiting writer, the reads gone", "Relaxed", "order:u1:7")
	notInside("read after the writer, the writer inside")
	inW.Release()
	answered(wa, "the waiting writer", "order:u1:7")
	enter("read after the writer, the writer gone", "Order", "order:u1:7").Release()
	answered(r3, "read after the writer", "order:u1:7")

	// The control: the same pair on a method without Shared, one at a time.
	c1 := async("Plain", "u9")
	inC1 := enter("control: first call without Shared", "Plain", "order:u9:7")
	c2 := async("Plain", "u9")
	queued(waitingEvent(1, "order:u9:7", false), "control: second call without Shared, the first inside")
	notInside("control: second call without Shared, the first inside")
	inC1.Release()
	answered(c1, "control: first call without Shared", "order:u9:7")
	enter("control: second call without Shared, the first gone", "Plain", "order:u9:7").Release()
	answered(c2, "control: second call without Shared", "order:u9:7")
}

// testSharedOnRedlock: a Redlock Locker has no shared locks (RLock is
// core.ErrUnsupported), a deployment mistake: a Shared method on one
// answers Unavailable with a RetryInfo of rpclock.UnavailableRetryAfter
// (and Retry-After: 1 where the stack carries it), also with FailOpen, its
// handler not run, and logs at error naming the method. The control: a
// method without Shared on the same Locker serves under the lock.
func testSharedOnRedlock(t *testing.T, s Stack) {
	w := newWorld(t, s)
	clients := []redis.UniversalClient{w.Redis.Client(t), redistest.Start(t).Client(t), redistest.Start(t).Client(t)}
	l, err := core.NewRedlock(clients, core.WithPrefix(w.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var logBuf locktest.SyncBuffer
	w.client = s.Serve(t, Server{Locker: l, Service: w.Service, Served: w.record, Logger: slog.New(slog.NewTextHandler(&logBuf, nil)),
		Rules: []Rule{
			{Method: "Order", Key: sharedKey, Shared: true},
			{Method: "Relaxed", Key: sharedKey, Shared: true, FailOpen: true},
			{Method: "Plain", Key: sharedKey},
		}})
	t.Cleanup(w.Service.Release)
	ctx := testCtx(t)
	for _, m := range []string{"Order", "Relaxed"} {
		r := w.call(ctx, m, req("u1", 7, 0))
		if r.Code != Unavailable || !r.RetryInfo || r.RetryDelay != time.Second {
			t.Fatalf("%s, shared on Redlock: %v, want Unavailable with a RetryInfo of 1s", m, r)
		}
		if s.RetryAfterIn != Nowhere && r.RetryAfter(s.RetryAfterIn) != "1" {
			t.Fatalf("%s, shared on Redlock: %v, want Retry-After 1", m, r)
		}
		if strings.Contains(r.Message, "RLock") || strings.Contains(r.Message, "Redlock") {
			t.Fatalf("%s: the message %q carries core's error text", m, r.Message)
		}
	}
	if n := w.Service.Calls(); n != 0 {
		t.Fatalf("a shared method's handler ran %d times on a Redlock Locker (fail-open must not apply)", n)
	}
	logs := logBuf.String()
	for _, m := range []string{"Order", "Relaxed"} {
		found := false
		for _, ln := range strings.Split(logs, "\n") {
			if strings.Contains(ln, FullMethod(m)) && strings.Contains(ln, "RLock") {
				found = true
				if !strings.Contains(ln, "level=ERROR") || !strings.Contains(ln, "Redlock") {
					t.Fatalf("log line %q, want an error naming Redlock", ln)
				}
			}
		}
		if !found {
			t.Fatalf("no log line names %s and RLock: %q", FullMethod(m), logs)
		}
	}
	if strings.Contains(logs, "fail-open") {
		t.Fatalf("a fail-open logged: %q", logs)
	}
	if r := w.call(ctx, "Plain", req("u1", 7, 0)); r.Code != OK || r.Key() != "order:u1:7" {
		t.Fatalf("control, without Shared: %v, want OK under the lock order:u1:7", r)
	}
}
