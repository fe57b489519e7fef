package httplock_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/middleware/nethttp"
	"github.com/lockgate/lockgate/redistest"
)

// ownerHeaders and ownerQueries are the obvious names a client could try
// to pass itself off as a lock's owner with.
var (
	ownerHeaders = []string{"X-Lock-Owner", "X-Owner", "Owner", "X-Lockgate-Owner", "Lockgate-Owner", "X-Request-Id"}
	ownerQueries = []string{"owner", "lock_owner"}
)

// TestNoOwnerFromRequest: while request A holds order:1:7 (its handler
// blocked after sending its response headers), request B for the same
// key never re-enters A's lock, whatever it carries: each owner-ish
// header, query parameter and JSON body field (on a route whose key reads
// the body, so the middleware parses it), one at a time and all at once,
// set to each value observable about A — the response headers A's client
// already has (its X-Request-Id echoed, the lease's fence and key) and
// even the owner token of the lock hash in Redis. Every B is 429 and its
// handler never runs; A's hold is untouched. The controls: inside A's
// handler a nested Lock with A's lease context re-enters; once A is
// released, the same B is served.
func TestNoOwnerFromRequest(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l := newLocker(t, srv)
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	var ranB atomic.Int32
	var reentered atomic.Bool
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("role") != "a" {
			ranB.Add(1)
			io.WriteString(w, "B")
			return
		}
		lease := httplock.FromContext(r.Context())
		inner, err := l.Lock(r.Context(), lease.Key(), core.WithWait(core.NoWait))
		if err == nil {
			reentered.Store(inner.Reentrant())
			err = inner.Unlock(r.Context())
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		// What A's client sees while A still holds the lock.
		w.Header().Set("X-Request-Id", r.Header.Get("X-Request-Id"))
		w.Header().Set("X-Lock-Fence", strconv.FormatInt(lease.Fence(), 10))
		w.Header().Set("X-Lock-Key", lease.Key())
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "A")
	})
	mux := http.NewServeMux()
	// Two routes, one lock name: /seckill reads the user from the query,
	// /body from a JSON body.
	mux.Handle("POST /seckill/{voucher}", httplock.Must(httplock.New(l, "order:{query.user_id}:{path.voucher}", httplock.WithWait(core.NoWait)))(handler))
	mux.Handle("POST /body/{voucher}", httplock.Must(httplock.New(l, "order:{body.user_id}:{path.voucher}", httplock.WithWait(core.NoWait)))(handler))
	ts, _ := serve(t, mux)
	ctx := locktest.Context(t)

	send := func(path string, header http.Header, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		return ts.Client().Do(req)
	}
	const requestID = "req-a-6f1c2d"
	respA, err := send("/seckill/7?user_id=1&role=a", http.Header{"X-Request-Id": {requestID}}, "")
	if err != nil || respA.StatusCode != 200 {
		t.Fatalf("A: %v %v", respA, err)
	}
	defer respA.Body.Close()
	if !reentered.Load() {
		t.Fatal("control: a nested Lock with A's lease context did not re-enter")
	}
	redisKey := locktest.RedisKey("order:1:7")
	owner, err := rdb.HGet(ctx, redisKey, "owner").Result()
	if err != nil || owner == "" {
		t.Fatalf("HGET %s owner: %q %v", redisKey, owner, err)
	}
	values := []string{respA.Header.Get("X-Request-Id"), respA.Header.Get("X-Lock-Fence"), respA.Header.Get("X-Lock-Key"), owner}
	if values[0] != requestID || values[1] == "" || values[2] != "order:1:7" {
		t.Fatalf("A's response headers %v", respA.Header)
	}

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
	result := func(at attempt) (int, string, string) {
		if at.header == nil {
			at.header = http.Header{}
		}
		resp, err := send(path(at), at.header, at.body)
		if err != nil {
			t.Fatalf("B with %s: %v", at.what, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
	}
	for _, at := range attempts {
		if code, retry, body := result(at); code != http.StatusTooManyRequests || retry == "" {
			t.Errorf("B with %s: %d %q, want 429 with Retry-After (busy): never A's lock", at.what, code, body)
		}
	}
	if n := ranB.Load(); n != 0 {
		t.Fatalf("B's handler ran %d times while A held the lock", n)
	}
	if got, err := rdb.HGet(ctx, redisKey, "owner").Result(); err != nil || got != owner {
		t.Fatalf("A's lock hash now has owner %q (%v), want A's %q", got, err, owner)
	}

	close(release)
	if b, err := io.ReadAll(respA.Body); err != nil || string(b) != "A" {
		t.Fatalf("A's body: %q %v", b, err)
	}
	// The control: the last B (every name at once) is served now.
	if code, _, body := result(attempts[len(attempts)-1]); code != 200 || body != "B" {
		t.Fatalf("B after A's release: %d %q, want 200", code, body)
	}
	if locktest.Held(t, context.Background(), rdb, "order:1:7") {
		t.Fatal("order:1:7 still held after both requests")
	}
}
