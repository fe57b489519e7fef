package httpsuite

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
)

// holdRoute serves path with key on l: its handler reports its lease's key
// on inside and blocks until g opens.
func holdRoute(path string, l *core.Locker, key string, inside chan<- string, g *gate) Route {
	return Route{Method: "POST", Path: path, Locker: l, Key: key, Options: Options{Wait: core.NoWait}, Handler: func(_ context.Context, lease *core.Lease, _ Request) (int, string) {
		inside <- lease.Key()
		g.wait()
		return http.StatusOK, lease.Key()
	}}
}

// keyRoute serves path with key on l, answering the lease's key.
func keyRoute(path string, l *core.Locker, key string) Route {
	return Route{Method: "POST", Path: path, Locker: l, Key: key, Options: Options{Wait: core.NoWait}, Handler: func(_ context.Context, lease *core.Lease, _ Request) (int, string) {
		return http.StatusOK, lease.Key()
	}}
}

// hold sends a request to url whose handler holds its lock until g opens,
// and returns the lease's key once the handler is inside, and the
// request's answer (after g opens).
func (e *env) hold(url string, inside <-chan string) (string, <-chan locktest.Result) {
	e.t.Helper()
	answer := make(chan locktest.Result, 1)
	go func() { answer <- e.post(url) }()
	select {
	case key := <-inside:
		return key, answer
	case r := <-answer:
		e.t.Fatalf("holding request: %d %v %s", r.Status, r.Err, r.Body)
	}
	panic("unreachable")
}

// typedPlaceholders: {query.user_id:int} and {path.voucher:uint} lock the
// canonical value, so user 01 / voucher 007 and user 1 / voucher 7 are one
// lock (the second is busy while the first is held), another user is not
// blocked (the control), and a value that does not parse is a 400 naming
// the field. "+1" is sent as %2B1: a raw '+' in a query string decodes to
// a space, so ?user_id=+1 is one of the 400s.
func typedPlaceholders(t *testing.T, s Stack) {
	e := newEnv(t, s)
	l := e.locker()
	const key = "order:{query.user_id:int}:{path.voucher:uint}"
	inside := make(chan string, 1)
	g := e.gate()
	base := e.serve(holdRoute("/hold/{voucher}", l, key, inside, g), keyRoute(seckillPath, l, key))
	k, first := e.hold(base+"/hold/007?user_id=01", inside)
	if k != "order:1:7" {
		t.Fatalf("key %q, want order:1:7", k)
	}
	for _, q := range []string{"/seckill/7?user_id=1", "/seckill/7?user_id=%2B1", "/seckill/0007?user_id=001"} {
		if r := e.post(base + q); r.Err != nil || r.Status != http.StatusTooManyRequests {
			t.Errorf("%s while order:1:7 is held: %d %v %s, want 429", q, r.Status, r.Err, r.Body)
		}
	}
	if r := e.post(base + "/seckill/7?user_id=02"); r.Err != nil || r.Status != 200 || r.Body != "order:2:7" {
		t.Errorf("control, another user: %d %v %q, want 200 under order:2:7", r.Status, r.Err, r.Body)
	}
	for _, c := range []struct{ q, part string }{
		{"/seckill/7?user_id=x", "query.user_id"},
		{"/seckill/7?user_id=1.0", "query.user_id"},
		{"/seckill/7?user_id=+1", "query.user_id"}, // " 1" once decoded
		{"/seckill/-7?user_id=1", "path.voucher"},
		{"/seckill/x?user_id=1", "path.voucher"},
	} {
		r := e.post(base + c.q)
		if r.Err != nil || r.Status != http.StatusBadRequest {
			t.Errorf("%s: %d %v %s, want 400", c.q, r.Status, r.Err, r.Body)
			continue
		}
		if msg := errorText(t, r); !strings.HasPrefix(msg, c.part+": invalid value") {
			t.Errorf("%s: text %q, want it to start with %q", c.q, msg, c.part+": invalid value")
		}
	}
	g.open()
	if r := recv(t, first, "the holding request"); r.Err != nil || r.Status != 200 || r.Body != "order:1:7" {
		t.Fatalf("first request: %d %v %q", r.Status, r.Err, r.Body)
	}
}

// pathUnescaped: a path parameter is read unescaped, as the router's
// handlers see it decoded, so a client cannot take a second lock on the
// same voucher by percent-encoding it: /seckill/%37 is busy while
// /seckill/7 is held, and /seckill/a%3Ab while /seckill/a:b is. The
// control: another voucher is served.
func pathUnescaped(t *testing.T, s Stack) {
	if s.RawPathParams {
		t.Skip("the router hands path parameters on percent-encoded as the client sent them (RawPathParams)")
	}
	e := newEnv(t, s)
	l := e.locker()
	const key = "order:{path.voucher}"
	inside := make(chan string, 2)
	g := e.gate()
	base := e.serve(holdRoute("/hold/{voucher}", l, key, inside, g), keyRoute(seckillPath, l, key))
	var answers []<-chan locktest.Result
	for _, c := range []struct{ held, want string }{{"7", "order:7"}, {"a:b", "order:a%3Ab"}} {
		k, answer := e.hold(base+"/hold/"+c.held, inside)
		if k != c.want {
			t.Fatalf("key %q, want %s", k, c.want)
		}
		answers = append(answers, answer)
	}
	for _, p := range []string{"/seckill/%37", "/seckill/a%3Ab", "/seckill/a%3ab"} {
		if r := e.post(base + p); r.Err != nil || r.Status != http.StatusTooManyRequests {
			t.Errorf("%s while its voucher is held: %d %v %s, want 429", p, r.Status, r.Err, r.Body)
		}
	}
	if r := e.post(base + "/seckill/8"); r.Err != nil || r.Status != 200 || r.Body != "order:8" {
		t.Errorf("control, another voucher: %d %v %q, want 200 under order:8", r.Status, r.Err, r.Body)
	}
	g.open()
	for _, a := range answers {
		if r := recv(t, a, "a holding request"); r.Err != nil || r.Status != 200 {
			t.Fatalf("holding request: %d %v %s", r.Status, r.Err, r.Body)
		}
	}
}
