package rpcsuite

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
)

// testInvalidKey: a missing, empty, too long or control-character value is
// InvalidArgument naming the placeholder, without a retry hint or a Go
// name (checkNoRetry); nothing runs, nothing is locked.
// The control: the same method with good values is served under its lock.
func testInvalidKey(t *testing.T, s Stack) {
	w := newWorld(t, s).serve(t, nil)
	ctx := testCtx(t)
	md := []string{"x-user-id", "m1"}
	for _, tc := range []struct {
		name   string
		method string
		req    *testpb.OrderRequest
		md     []string
		part   string
	}{
		{"missing user_id", "Order", &testpb.OrderRequest{VoucherId: 7}, nil, "user_id"},
		{"zero voucher_id", "Order", &testpb.OrderRequest{UserId: "u1"}, nil, "voucher_id"},
		{"missing nested message", "Nested", &testpb.OrderRequest{}, md, "field.item.sku"},
		{"empty nested field", "Nested", &testpb.OrderRequest{Item: &testpb.Item{Count: 2}}, md, "field.item.sku"},
		{"missing metadata", "Nested", &testpb.OrderRequest{Item: &testpb.Item{Sku: "s1"}}, nil, "md.x-user-id"},
		{"empty metadata", "Nested", &testpb.OrderRequest{Item: &testpb.Item{Sku: "s1"}}, []string{"x-user-id", ""}, "md.x-user-id"},
		{"too long", "Order", &testpb.OrderRequest{UserId: strings.Repeat("x", 300), VoucherId: 7}, nil, "user_id"},
		{"control character", "Order", &testpb.OrderRequest{UserId: "a\nb", VoucherId: 7}, nil, "user_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := w.call(ctx, tc.method, tc.req, tc.md...)
			if r.Code != InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", r)
			}
			if !strings.Contains(r.Message, tc.part) || !strings.Contains(r.Message, FullMethod(tc.method)) {
				t.Fatalf("message %q does not name %q and the method", r.Message, tc.part)
			}
			checkNoRetry(t, "bad input", r)
		})
	}
	if got := w.Service.Calls(); got != 0 {
		t.Fatalf("handler ran %d times on bad keys, want 0", got)
	}
	if keys := w.LockKeys(t); len(keys) != 0 {
		t.Fatalf("bad keys locked something: %v", keys)
	}
	// The same method with good values works (nested field + metadata).
	if r := w.call(ctx, "Nested", &testpb.OrderRequest{Item: &testpb.Item{Sku: "s1"}}, md...); r.Code != OK || r.Key() != "sku:s1:m1" {
		t.Fatalf("Nested = %v; want key sku:s1:m1", r)
	}
}

// testTypedCanonical: with {user_id:int} on a string field, "01", "+1" and
// "1" are one user and lock one key (a second call is ResourceExhausted
// while the first is held); "2" is another key (the control); "x" is
// InvalidArgument naming the field, and runs nothing.
func testTypedCanonical(t *testing.T, s Stack) {
	w := newWorld(t, s).serve(t, func(sv *Server) {
		sv.Rules = []Rule{{Method: "Order", Key: "order:{user_id:int}", Wait: core.NoWait}}
	})
	ctx := testCtx(t)
	held := w.startHolder(t, ctx, "Order", &testpb.OrderRequest{UserId: "01", PauseMs: -1})
	if !w.Exists(t, w.LockKey("order:1")) {
		t.Fatalf("holder of \"01\" did not lock the canonical key %s (keys %v)", w.LockKey("order:1"), w.LockKeys(t))
	}
	for _, spelling := range []string{"1", "+1", "001"} {
		if r := w.call(ctx, "Order", &testpb.OrderRequest{UserId: spelling}); r.Code != ResourceExhausted {
			t.Fatalf("user_id %q while \"01\" is held: %v, want ResourceExhausted (one user, one lock)", spelling, r)
		}
	}
	// Control: another user is not blocked, so the busy answers above come
	// from the shared key.
	if r := w.call(ctx, "Order", &testpb.OrderRequest{UserId: "2"}); r.Code != OK || r.Key() != "order:2" {
		t.Fatalf("user_id \"2\" = %v; want key order:2", r)
	}
	if r := w.call(ctx, "Order", &testpb.OrderRequest{UserId: "x"}); r.Code != InvalidArgument || !strings.Contains(r.Message, "user_id") {
		t.Fatalf("user_id \"x\": %v, want InvalidArgument naming user_id", r)
	}
	if got := w.Service.Calls(); got != 2 {
		t.Fatalf("handler ran %d times, want 2 (the holder and user 2)", got)
	}
	w.Service.Release()
	if r := wait(t, held); r.Code != OK {
		t.Fatalf("holder: %v", r)
	}
	if r := w.call(ctx, "Order", &testpb.OrderRequest{UserId: "+1"}); r.Code != OK || r.Key() != "order:1" {
		t.Fatalf("user_id \"+1\" after release = %v; want key order:1", r)
	}
}

// testGoRuleOverAnnotation: a Go rule for an annotated method replaces the
// annotation (here: lock on metadata instead of the request fields, single
// attempt); a Go rule can also lock an unannotated method.
func testGoRuleOverAnnotation(t *testing.T, s Stack) {
	w := newWorld(t, s).serve(t, func(sv *Server) {
		sv.Rules = []Rule{
			{Method: "Order", Key: "go:{md.x-user-id}", Options: []core.LockOption{core.WithWait(core.NoWait)}},
			{Method: "Plain", Key: "plain:{user_id}", Options: []core.LockOption{core.WithWait(core.NoWait)}},
		}
	})
	ctx := testCtx(t)
	m1 := []string{"x-user-id", "m1"}
	if r := w.call(ctx, "Order", req("u1", 7, 0), m1...); r.Code != OK || r.Key() != "go:m1" {
		t.Fatalf("Order under the Go rule = %v; want key go:m1", r)
	}
	// Without the metadata the Go rule's key is missing, although the
	// annotation's fields are all there.
	if r := w.call(ctx, "Order", req("u1", 7, 0)); r.Code != InvalidArgument || !strings.Contains(r.Message, "md.x-user-id") {
		t.Fatalf("Order without metadata: %v, want InvalidArgument naming md.x-user-id", r)
	}
	// Two calls with different request fields but the same metadata
	// collide under the Go rule; the second fails at once (wait 0), not
	// after the annotation's 2s.
	held := w.startHolder(t, ctx, "Order", req("u1", 7, -1), m1...)
	start := time.Now()
	if r := w.call(ctx, "Order", req("u2", 8, 0), m1...); r.Code != ResourceExhausted {
		t.Fatalf("second Order under the Go rule: %v, want ResourceExhausted", r)
	}
	if d := time.Since(start); d >= 2*time.Second {
		t.Fatalf("busy answer took %v: the annotation's 2s wait was used, not the Go rule's 0", d)
	}
	w.Service.Release()
	if r := wait(t, held); r.Code != OK {
		t.Fatalf("holder: %v", r)
	}
	if r := w.call(ctx, "Plain", req("u9", 0, 0)); r.Code != OK || r.Key() != "plain:u9" {
		t.Fatalf("Plain under a Go rule = %v; want key plain:u9", r)
	}
}

// testGoRuleSettings is the control of each interceptor's setup-error
// tests: a fail-open Go rule with a typed key, Wait core.NoWait, a TTL and
// Options, plus WithLockOptions and WithReleaseTimeout, is accepted and
// serves calls under the lock with the rule's settings.
func testGoRuleSettings(t *testing.T, s Stack) {
	w := newWorld(t, s).serve(t, func(sv *Server) {
		sv.LockOptions = []core.LockOption{core.WithTTL(5 * time.Second), core.WithWatchdog()}
		sv.ReleaseTimeout = 2 * time.Second
		sv.Rules = []Rule{{
			Method:   "Order",
			Key:      "order:{user_id:int}:{voucher_id}",
			Wait:     core.NoWait,
			TTL:      time.Second, // wins over WithLockOptions' 5s
			FailOpen: true,
			Options:  []core.LockOption{core.WithReleaseTimeout(time.Second)},
		}}
	})
	ctx := testCtx(t)
	held := w.startHolder(t, ctx, "Order", req("7", 3, -1))
	k := w.LockKey("order:7:3")
	ttl, err := w.RDB.PTTL(ctx, k).Result()
	if err != nil || ttl <= 0 || ttl > time.Second {
		t.Fatalf("PTTL %s = %v, %v; want the rule's TTL, in (0, 1s]", k, ttl, err)
	}
	start := time.Now()
	if r := w.call(ctx, "Order", req("7", 3, 0)); r.Code != ResourceExhausted {
		t.Fatalf("second call while held: %v, want ResourceExhausted", r)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("busy answer took %v: Wait core.NoWait should make one attempt", d)
	}
	w.Service.Release()
	if r := wait(t, held); r.Code != OK {
		t.Fatalf("holder: %v", r)
	}
	if w.Exists(t, k) {
		t.Fatalf("lock %s still held after the handler returned", k)
	}
}

// testEventsPattern: a method's lock events name its annotation's key
// template, not the key; a Go rule's events name the rule's.
func testEventsPattern(t *testing.T, s Stack) {
	rec := &locktest.Patterns{}
	w := newWorld(t, s, core.WithObserver(rec)).serve(t, func(sv *Server) {
		sv.Rules = []Rule{{Method: "Plain", Key: "plain:{user_id}"}}
	})
	ctx := testCtx(t)
	if r := w.call(ctx, "Order", req("u1", 7, 0)); r.Code != OK {
		t.Fatal(r)
	}
	if r := w.call(ctx, "Plain", req("u1", 0, 0)); r.Code != OK {
		t.Fatal(r)
	}
	if msg := rec.Check("order:", "order:{user_id}:{voucher_id}"); msg != "" {
		t.Fatal(msg)
	}
	if msg := rec.Check("plain:", "plain:{user_id}"); msg != "" {
		t.Fatal(msg)
	}
}

// ownerMD are the obvious metadata names a client could try to pass
// itself off as a lock's owner with.
var ownerMD = []string{"x-lock-owner", "lockgate-owner", "x-lockgate-owner", "x-owner", "owner", "lock-owner", "x-request-id"}

// OwnerAttempts lists the metadata (name, value pairs) of every call that
// tries to pass itself off as a lock's owner with one of values: each
// owner-ish name at a time, then all at once (and as binary metadata).
// The suite's no-owner-from-the-request case uses it, and the adapters'
// stream variants.
func OwnerAttempts(values []string) [][]string {
	var out [][]string
	for _, v := range values {
		var all []string
		for _, name := range ownerMD {
			out = append(out, []string{name, v})
			all = append(all, name, v)
		}
		out = append(out, append(all, "lockgate-owner-bin", v))
	}
	return out
}

// testNoOwnerFromRequest: while call A holds order:1:1 (handler blocked),
// call B for the same key never re-enters A's lock, whatever metadata it
// carries: each owner-ish name, one at a time and all at once (also as a
// -bin key), set to each value observable about A — the fence and key of
// its lease, its x-request-id, and even the owner token of the lock hash
// in Redis. Every B is ResourceExhausted and no handler of B runs; A's
// hold is untouched. The controls: inside A's handler a nested Lock with
// A's context re-enters; once A is released, the same Bs are served.
func testNoOwnerFromRequest(t *testing.T, s Stack) {
	w := newWorld(t, s)
	type held struct {
		key       string
		fence     int64
		reentered bool
		err       error
	}
	heldc := make(chan held, 1)
	w.Service.OnHold = func(ctx context.Context, _ *testpb.OrderRequest) {
		lease := core.FromContext(ctx)
		h := held{key: lease.Key(), fence: lease.Fence()}
		inner, err := w.Locker.Lock(ctx, lease.Key(), core.WithWait(core.NoWait))
		if err == nil {
			h.reentered = inner.Reentrant()
			err = inner.Unlock(ctx)
		}
		h.err = err
		heldc <- h
	}
	w.serve(t, nil)
	ctx := testCtx(t)
	const requestID = "req-a-6f1c2d"
	doneA := w.startHolder(t, ctx, "Order", req("1", 1, -1), "x-request-id", requestID)
	h := <-heldc
	if h.err != nil || !h.reentered || h.key != "order:1:1" {
		t.Fatalf("control: a nested Lock with A's context: %+v; want a re-entry of order:1:1", h)
	}
	k := w.LockKey("order:1:1")
	owner, _, err := locktest.Holder(ctx, w.RDB, k)
	if err != nil || owner == "" {
		t.Fatalf("%s's owner: %q %v", k, owner, err)
	}
	values := []string{strconv.FormatInt(h.fence, 10), h.key, owner, requestID}
	attempts := OwnerAttempts(values)
	callsBefore := w.Service.Calls()
	for _, md := range attempts {
		if r := w.call(ctx, "Quick", req("1", 1, 0), md...); r.Code != ResourceExhausted {
			t.Errorf("B with metadata %q: %v, want ResourceExhausted (busy): never A's lock", md, r)
		}
	}
	if n := w.Service.Calls() - callsBefore; n != 0 {
		t.Fatalf("%d handlers of B ran while A held the lock", n)
	}
	if got, _, _ := locktest.Holder(ctx, w.RDB, k); got != owner {
		t.Fatalf("%s now has owner %q, was %q: A's hold was touched", k, got, owner)
	}
	w.Service.Release()
	if r := wait(t, doneA); r.Code != OK {
		t.Fatalf("A: %v", r)
	}
	// The control: the last B (every name at once) is served now, and
	// nothing is left held.
	if r := w.call(ctx, "Quick", req("1", 1, 0), attempts[len(attempts)-1]...); r.Code != OK {
		t.Fatalf("B after A's release: %v, want OK", r)
	}
	if left := w.LockKeys(t); len(left) != 0 {
		t.Fatalf("locks left held: %v", left)
	}
}
