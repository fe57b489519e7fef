package httpsuite

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
)

// ownerHeaders and ownerQueries are the obvious names a client could try
// to pass itself off as a lock's owner with.
var (
	ownerHeaders = []string{"X-Lock-Owner", "X-Owner", "Owner", "X-Lockgate-Owner", "Lockgate-Owner", "X-Request-Id"}
	ownerQueries = []string{"owner", "lock_owner"}
)

// noOwnerFromRequest: while request A holds order:1:7 (its handler
// blocked), request B for the same key never re-enters A's lock, whatever
// it carries: each owner-ish header, query parameter and JSON body field
// (on a route whose key reads the body, so the middleware parses it), one
// at a time and all at once, set to each value observable about A — its
// fence and key (as its handler sees them and could echo them), its
// X-Request-Id, and even the owner token of the lock hash in Redis. Every
// B is 429 and its handler never runs; A's hold is untouched. The
// controls: inside A's handler a nested Lock with A's ctx re-enters; once
// A is released, the same B is served.
func noOwnerFromRequest(t *testing.T, s Stack) {
	e := newEnv(t, s)
	l := e.locker()
	type held struct {
		key       string
		fence     int64
		reentered bool
		err       error
	}
	heldc := make(chan held, 1)
	g := e.gate()
	a := func(ctx context.Context, lease *core.Lease, _ Request) (int, string) {
		h := held{key: lease.Key(), fence: lease.Fence()}
		inner, err := l.Lock(ctx, lease.Key(), core.WithWait(core.NoWait))
		if err == nil {
			h.reentered = inner.Reentrant()
			err = inner.Unlock(ctx)
		}
		h.err = err
		heldc <- h
		g.wait()
		return http.StatusOK, "A"
	}
	var ranB atomic.Int32
	b := func(context.Context, *core.Lease, Request) (int, string) {
		ranB.Add(1)
		return http.StatusOK, "B"
	}
	nowait := Options{Wait: core.NoWait}
	// Three routes, one lock name: A's and /seckill read the user from the
	// query, /body from a JSON body.
	base := e.serve(
		Route{Method: "POST", Path: "/a/{voucher}", Locker: l, Key: seckillKey, Options: nowait, Handler: a},
		Route{Method: "POST", Path: seckillPath, Locker: l, Key: seckillKey, Options: nowait, Handler: b},
		Route{Method: "POST", Path: "/body/{voucher}", Locker: l, Key: "order:{body.user_id}:{path.voucher}", Options: nowait, Handler: b},
	)
	const requestID = "req-a-6f1c2d"
	doneA := make(chan locktest.Result, 1)
	go func() {
		doneA <- locktest.Send(e.ctx, e.client, "POST", base+"/a/7?user_id=1", http.Header{"X-Request-Id": {requestID}}, "", "")
	}()
	var h held
	select {
	case h = <-heldc:
	case r := <-doneA:
		t.Fatalf("A: %d %v %s", r.Status, r.Err, r.Body)
	}
	if h.err != nil || !h.reentered {
		t.Fatalf("control: a nested Lock with A's ctx: reentrant %v, %v; want a re-entry", h.reentered, h.err)
	}
	redisKey := locktest.RedisKey("order:1:7")
	owner, _, err := locktest.Holder(e.ctx, e.rdb, redisKey)
	if err != nil || owner == "" {
		t.Fatalf("%s's owner: %q %v", redisKey, owner, err)
	}
	values := []string{strconv.FormatInt(h.fence, 10), h.key, owner, requestID}

	type attempt struct {
		what   string
		query  url.Values
		header http.Header
		body   string
	}
	var attempts []attempt
	for _, v := range values {
		for _, name := range ownerHeaders {
			attempts = append(attempts, attempt{what: "header " + name + ": " + v, header: http.Header{name: {v}}})
		}
		for _, name := range ownerQueries {
			attempts = append(attempts, attempt{what: "query " + name + "=" + v, query: url.Values{name: {v}}})
		}
		body := `{"user_id": "1", "owner": ` + strconv.Quote(v) + `}`
		attempts = append(attempts, attempt{what: "body " + body, body: body})
		all := attempt{what: "all at once, " + v, header: http.Header{}, query: url.Values{}, body: body}
		for _, name := range ownerHeaders {
			all.header.Set(name, v)
		}
		for _, name := range ownerQueries {
			all.query.Set(name, v)
		}
		attempts = append(attempts, all)
	}
	// send sends an attempt with a body to /body (the user in the body),
	// the others to /seckill (the user in the query).
	send := func(at attempt) locktest.Result {
		q := url.Values{}
		for k, v := range at.query {
			q[k] = v
		}
		if at.body != "" {
			return locktest.Send(e.ctx, e.client, "POST", base+"/body/7?"+q.Encode(), at.header, jsonCT, at.body)
		}
		q.Set("user_id", "1")
		return locktest.Send(e.ctx, e.client, "POST", base+"/seckill/7?"+q.Encode(), at.header, "", "")
	}
	for _, at := range attempts {
		if r := send(at); r.Err != nil || r.Status != http.StatusTooManyRequests || r.RetryAfter == "" {
			t.Errorf("B with %s: %d %v %q, want 429 with Retry-After (busy): never A's lock", at.what, r.Status, r.Err, r.Body)
		}
	}
	if n := ranB.Load(); n != 0 {
		t.Fatalf("B's handler ran %d times while A held the lock", n)
	}
	if got, _, err := locktest.Holder(e.ctx, e.rdb, redisKey); err != nil || got != owner {
		t.Fatalf("A's lock hash now has owner %q (%v), want A's %q", got, err, owner)
	}

	g.open()
	if r := recv(t, doneA, "A's answer"); r.Err != nil || r.Status != 200 || r.Body != "A" {
		t.Fatalf("A: %d %v %q", r.Status, r.Err, r.Body)
	}
	// The control: the last B (every name at once) is served now.
	if r := send(attempts[len(attempts)-1]); r.Err != nil || r.Status != 200 || r.Body != "B" {
		t.Fatalf("B after A's release: %d %v %q, want 200", r.Status, r.Err, r.Body)
	}
	if e.held("order:1:7") {
		t.Fatal("order:1:7 still held after both requests")
	}
}
