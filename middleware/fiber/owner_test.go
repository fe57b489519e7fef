package fiberlock_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/middleware/fiber"
	"github.com/lockgate/lockgate/redistest"
)

// ownerHeaders and ownerQueries are the obvious names a client could try
// to pass itself off as a lock's owner with.
var (
	ownerHeaders = []string{"X-Lock-Owner", "X-Owner", "Owner", "X-Lockgate-Owner", "Lockgate-Owner", "X-Request-Id"}
	ownerQueries = []string{"owner", "lock_owner"}
)

// TestNoOwnerFromRequest: while request A holds order:1:7 (its handler
// blocked), request B for the same key never re-enters A's lock, whatever
// it carries: each owner-ish header, query parameter and JSON body field,
// one at a time and all at once, set to each value observable about A —
// its fence and key (as the handler sees them), its X-Request-Id, and even
// the owner token of the lock hash in Redis. Every B is 429 and its
// handler never runs; A's hold is untouched. The controls: inside A's
// handler a nested Lock with A's lease context re-enters; once A is
// released, the same B is served.
func TestNoOwnerFromRequest(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l := newLocker(t, srv)
	type held struct {
		key       string
		fence     int64
		reentered bool
		err       error
	}
	heldc := make(chan held, 1)
	release := make(chan struct{})
	var ranB atomic.Int32
	f := newApp()
	handler := func(c *fiber.Ctx) error {
		if c.Query("role") != "a" {
			ranB.Add(1)
			return c.SendString("B")
		}
		lease := fiberlock.FromContext(c)
		h := held{key: lease.Key(), fence: lease.Fence()}
		inner, err := l.Lock(c.UserContext(), lease.Key(), core.WithWait(core.NoWait))
		if err == nil {
			h.reentered = inner.Reentrant()
			err = inner.Unlock(c.UserContext())
		}
		h.err = err
		heldc <- h
		<-release
		return c.SendString("A")
	}
	// Two routes, one lock name: /seckill reads the user from the query,
	// /body from a JSON body, which the middleware then parses.
	f.Post("/seckill/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{query.user_id}:{path.voucher}", Wait: core.NoWait}), handler)
	f.Post("/body/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{body.user_id}:{path.voucher}", Wait: core.NoWait}), handler)
	a := start(t, f)
	ctx := locktest.Context(t)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	const requestID = "req-a-6f1c2d"
	send := func(path string, header http.Header, body string) locktest.Result {
		req, err := http.NewRequestWithContext(ctx, "POST", a.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := a.client.Do(req)
		if err != nil {
			return locktest.Result{Err: err}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return locktest.Result{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"), Body: string(b)}
	}
	doneA := make(chan locktest.Result, 1)
	go func() { doneA <- send("/seckill/7?user_id=1&role=a", http.Header{"X-Request-Id": {requestID}}, "") }()
	h := <-heldc
	if h.err != nil || !h.reentered {
		t.Fatalf("control: a nested Lock with A's lease context: reentrant %v, %v; want a re-entry", h.reentered, h.err)
	}
	redisKey := locktest.RedisKey("order:1:7")
	owner, err := rdb.HGet(ctx, redisKey, "owner").Result()
	if err != nil || owner == "" {
		t.Fatalf("HGET %s owner: %q %v", redisKey, owner, err)
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
	// path sends an attempt with a body to /body (the user in the body),
	// the others to /seckill (the user in the query).
	path := func(at attempt) string {
		q := url.Values{}
		for k, v := range at.query {
			q[k] = v
		}
		if at.body != "" {
			return "/body/7?" + q.Encode()
		}
		q.Set("user_id", "1")
		return "/seckill/7?" + q.Encode()
	}
	for _, at := range attempts {
		if at.header == nil {
			at.header = http.Header{}
		}
		r := send(path(at), at.header, at.body)
		if r.Err != nil || r.Status != http.StatusTooManyRequests || r.RetryAfter == "" {
			t.Errorf("B with %s: %d %v %q, want 429 with Retry-After (busy): never A's lock", at.what, r.Status, r.Err, r.Body)
		}
	}
	if n := ranB.Load(); n != 0 {
		t.Fatalf("B's handler ran %d times while A held the lock", n)
	}
	if got, err := rdb.HGet(ctx, redisKey, "owner").Result(); err != nil || got != owner {
		t.Fatalf("A's lock hash now has owner %q (%v), want A's %q", got, err, owner)
	}

	close(release)
	if r := <-doneA; r.Err != nil || r.Status != 200 || r.Body != "A" {
		t.Fatalf("A: %d %v %q", r.Status, r.Err, r.Body)
	}
	// The control: the last B (every name at once) is served now.
	last := attempts[len(attempts)-1]
	if r := send(path(last), last.header, last.body); r.Err != nil || r.Status != 200 || r.Body != "B" {
		t.Fatalf("B after A's release: %d %v %q, want 200", r.Status, r.Err, r.Body)
	}
	if locktest.Held(t, context.Background(), rdb, "order:1:7") {
		t.Fatal("order:1:7 still held after both requests")
	}
}
