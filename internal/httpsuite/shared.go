package httpsuite

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// voucherKey is the key template of the shared cases: the readers of a
// voucher (GET /vouchers/{voucher}, shared) and its restock (PUT, the
// writer) lock the same name.
const voucherKey = "voucher:{path.voucher}"

// sharedWait is the wait budget of the shared cases' routes that are to
// get in: long enough never to run out on a loaded machine.
const sharedWait = 10 * time.Second

// nth matches the n-th event (counting from 1) that match matches; it
// keeps count, so use one per Events.Wait.
func nth(n int, match func(core.Event) bool) func(core.Event) bool {
	seen := 0
	return func(e core.Event) bool {
		if match(e) {
			seen++
		}
		return seen == n
	}
}

// waiting matches a request of the lock named key queued behind its
// holders: a reader's (RLock) when read, else a writer's.
func waiting(key string, read bool) func(core.Event) bool {
	return func(e core.Event) bool { return e.Kind == core.EventWaiting && e.Key == key && e.Read == read }
}

// shared: a route with Shared takes its key's lock shared. Two of its
// requests of one key are inside at once (the second enters while the
// first still holds, each held until both are in). A request to a route
// locking the same key exclusively (the writer) is busy meanwhile: 429
// with Retry-After after its wait budget, its handler not run. A writer
// with a long wait queues, a reader that comes after it queues behind it
// although readers are inside, the writer enters once they leave and the
// later reader only after the writer: the writer is not starved. The
// control: the same pair of requests on a route without Shared does not
// overlap — the second queues (its waiting event) and enters only once the
// first is released.
func shared(t *testing.T, s Stack) {
	e := newEnv(t, s)
	var events locktest.Events
	l := e.locker(core.WithObserver(&events))
	readers, writers, control := e.holder(), e.holder(), e.holder()
	base := e.serve(
		Route{Method: "GET", Path: "/vouchers/{voucher}", Locker: l, Key: voucherKey, Options: Options{Shared: true, Wait: sharedWait}, Handler: readers.handler},
		Route{Method: "PUT", Path: "/vouchers/{voucher}/restock", Locker: l, Key: voucherKey, Options: Options{Wait: sharedWait}, Handler: writers.handler},
		Route{Method: "PUT", Path: "/vouchers/{voucher}/restock-now", Locker: l, Key: voucherKey, Options: Options{Wait: limitWait}, Handler: writers.handler},
		Route{Method: "GET", Path: "/locked/{voucher}", Locker: l, Key: voucherKey, Options: Options{Wait: sharedWait}, Handler: control.handler},
	)
	send := func(method, path string) <-chan locktest.Result {
		c := make(chan locktest.Result, 1)
		go func() { c <- e.do(method, base+path, "", "") }()
		return c
	}
	enter := func(h *holder, what, wantKey string) inside {
		t.Helper()
		in := recv(t, h.entered, what)
		if in.key != wantKey {
			t.Fatalf("%s: lease key %q, want %q", what, in.key, wantKey)
		}
		return in
	}
	answered := func(c <-chan locktest.Result, what, wantBody string) {
		t.Helper()
		if r := recv(t, c, what); r.Err != nil || r.Status != http.StatusOK || r.Body != wantBody {
			t.Fatalf("%s: %d %v %q, want 200 %q", what, r.Status, r.Err, r.Body, wantBody)
		}
	}
	queued := func(match func(core.Event) bool, what string) {
		t.Helper()
		if _, ok := events.Wait(e.waitCtx(), match); !ok {
			t.Fatalf("%s: not waiting in the lock's queue within %v", what, bound)
		}
	}
	notInside := func(h *holder, what string) {
		t.Helper()
		select {
		case in := <-h.entered:
			in.release()
			t.Fatalf("%s: entered its handler (lease %q)", what, in.key)
		default:
		}
	}

	// Two readers of voucher 7 inside at once.
	r1 := send("GET", "/vouchers/7")
	in1 := enter(readers, "first reader", "voucher:7")
	r2 := send("GET", "/vouchers/7")
	in2 := enter(readers, "second reader, the first inside", "voucher:7")

	// The writer of voucher 7 is busy while they are inside.
	start := time.Now()
	w := recv(t, send("PUT", "/vouchers/7/restock-now"), "writer, readers inside")
	took := time.Since(start)
	if w.Err != nil || w.Status != http.StatusTooManyRequests {
		t.Fatalf("writer, readers inside: %d %v %s, want 429", w.Status, w.Err, w.Body)
	}
	if sec, err := strconv.Atoi(w.RetryAfter); err != nil || sec < 1 || sec > int(core.DefaultTTL/time.Second) {
		t.Fatalf("writer, readers inside: 429 with Retry-After %q, want whole seconds in [1, %v]", w.RetryAfter, core.DefaultTTL)
	}
	if took < limitWait {
		t.Fatalf("writer, readers inside: answered after %v, before its wait budget %v ended", took, limitWait)
	}
	if msg := errorText(t, w); !strings.Contains(msg, "busy") {
		t.Fatalf("busy text %q", msg)
	}
	if n := writers.ran.Load(); n != 0 {
		t.Fatalf("the writer's handler ran %d times while readers were inside", n)
	}

	// A waiting writer is not overtaken by a reader that comes after it.
	wa := send("PUT", "/vouchers/7/restock")
	queued(nth(2, waiting("voucher:7", false)), "writer with a long wait, readers inside") // the first was restock-now's
	r3 := send("GET", "/vouchers/7")
	queued(nth(1, waiting("voucher:7", true)), "reader after the waiting writer")
	notInside(readers, "reader after the waiting writer, before the readers left")
	in1.release()
	in2.release()
	answered(r1, "first reader", "voucher:7")
	answered(r2, "second reader", "voucher:7")
	inW := enter(writers, "the waiting writer, the readers gone", "voucher:7")
	notInside(readers, "reader after the writer, the writer inside")
	inW.release()
	answered(wa, "the waiting writer", "voucher:7")
	enter(readers, "reader after the writer, the writer gone", "voucher:7").release()
	answered(r3, "reader after the writer", "voucher:7")

	// The control: the same pair on a route without Shared, one at a time.
	c1 := send("GET", "/locked/9")
	inC1 := enter(control, "control: first request without Shared", "voucher:9")
	c2 := send("GET", "/locked/9")
	queued(nth(1, waiting("voucher:9", false)), "control: second request without Shared, the first inside")
	notInside(control, "control: second request without Shared, the first inside")
	inC1.release()
	answered(c1, "control: first request without Shared", "voucher:9")
	enter(control, "control: second request without Shared, the first gone", "voucher:9").release()
	answered(c2, "control: second request without Shared", "voucher:9")
}

// sharedOnRedlock: a Redlock Locker has no shared locks (RLock is
// core.ErrUnsupported), a deployment mistake: a Shared route on one answers
// every request 503 "lock service unavailable" with Retry-After: 1, also
// with FailOpen, its handler not run, and logs at error naming the route's
// pattern. The control: a route without Shared on the same Locker serves
// under the lock.
func sharedOnRedlock(t *testing.T, s Stack) {
	e := newEnv(t, s)
	clients := []redis.UniversalClient{e.srv.Client(t), redistest.Start(t).Client(t), redistest.Start(t).Client(t)}
	l, err := core.NewRedlock(clients)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var logBuf locktest.SyncBuffer
	logger := textLogger(&logBuf)
	c := &leaseCounter{}
	base := e.serve(
		Route{Method: "GET", Path: "/vouchers/{voucher}", Locker: l, Key: voucherKey, Options: Options{Shared: true, Logger: logger}, Handler: c.handler},
		Route{Method: "GET", Path: "/open/{voucher}", Locker: l, Key: voucherKey, Options: Options{Shared: true, FailOpen: true, Logger: logger}, Handler: c.handler},
		Route{Method: "PUT", Path: "/vouchers/{voucher}/restock", Locker: l, Key: voucherKey, Options: Options{Logger: logger}, Handler: c.handler},
	)
	for _, p := range []string{"/vouchers/7", "/open/7"} {
		r := e.do("GET", base+p, "", "")
		if r.Err != nil || r.Status != http.StatusServiceUnavailable {
			t.Fatalf("GET %s, shared on Redlock: %d %v %s, want 503", p, r.Status, r.Err, r.Body)
		}
		if msg := errorText(t, r); msg != "lock service unavailable" {
			t.Fatalf("503 text %q", msg)
		}
		if r.RetryAfter != "1" {
			t.Fatalf("503 Retry-After %q, want 1", r.RetryAfter)
		}
	}
	if c.ran.Load() != 0 {
		t.Fatal("a shared route's handler ran on a Redlock Locker (fail-open must not apply)")
	}
	logs := logBuf.String()
	var lines []string
	for _, ln := range strings.Split(logs, "\n") {
		if strings.Contains(ln, "RLock") {
			lines = append(lines, ln)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("%d log lines naming RLock, want one per request: %q", len(lines), logs)
	}
	for _, ln := range lines {
		if !strings.Contains(ln, "level=ERROR") || !strings.Contains(ln, "pattern="+voucherKey) || !strings.Contains(ln, "Redlock") {
			t.Fatalf("log line %q, want an error naming the pattern and Redlock", ln)
		}
	}
	if strings.Contains(logs, "fail-open") {
		t.Fatalf("a fail-open logged: %q", logs)
	}
	if r := e.do("PUT", base+"/vouchers/7/restock", "", ""); r.Err != nil || r.Status != http.StatusOK || c.leased.Load() != 1 {
		t.Fatalf("control, without Shared: %d %v %s, under a lease %d; want 200 under the lock", r.Status, r.Err, r.Body, c.leased.Load())
	}
}
