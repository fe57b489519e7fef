package rpcsuite

import (
	"context"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/internal/rpclock"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
	"github.com/lockgate/lockgate/redistest"
)

// The answers to a Redis that fails (fast, naming the cause), as the HTTP suite
// has them (internal/httpsuite: Retry-After on every 503, an unfillable
// placeholder the server's error), in RPC terms.

// answerBound bounds an answer said to come at once: a refusal is
// answered within one probe dial (~200ms), a single attempt on a hung
// Redis at its attempt timeout (core's default 500ms); the rest is a
// generous grace for a loaded machine under -race. The controls show that
// an answer that waits out the Order method's 2s wait budget (as a
// refused Lock did before: 2.05s, TryLock on a hung Redis 10s) fails it.
const answerBound = 1500 * time.Millisecond

// goNames are the forms of Go's own names in error text: a pointer to a
// package's type ("*seckillv1.OrderRequest", as connect's codecs print
// %T), a package-qualified type ("net.OpError"), Go protobuf's error
// prefix ("proto: cannot parse ...", whose space is at random a
// non-breaking one, U+00A0, so that nobody matches the text), an import
// path, a source position.
var goNames = regexp.MustCompile(`\*\[?\]?[A-Za-z_]\w*\.[A-Z]\w*|\b[a-z][a-z0-9_]*\.[A-Z]\w*|\bproto(json)?:[\s\x{00a0}]|\b(github\.com|golang\.org|google\.golang\.org|connectrpc\.com|go\.uber\.org)/|\.go:\d+`)

// fullMethods are full method names as gRPC writes them
// ("/lockgate.testpb.Orders/Order", "/pkg.S/M"): protobuf names, which
// answers carry on purpose, not Go's.
var fullMethods = regexp.MustCompile(`/[A-Za-z_][\w.]*/[A-Za-z_]\w*`)

// GoName returns the first Go type or package name in s (see goNames),
// "" when there is none. Full method names are not Go's.
func GoName(s string) string {
	return goNames.FindString(fullMethods.ReplaceAllString(s, "/<method>"))
}

// defaultsClient is a client of addr with go-redis's defaults (ReadTimeout
// 3s, MaxRetries 3, DialerRetries 5), as a new user has it, closed at t's
// cleanup.
func defaultsClient(t testing.TB, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// hungWorld serves, with the settings of set, on a Redis of its own with
// a client of go-redis's defaults, makes a call of method req (which must
// be served under its lock: a connection in the pool, the server check
// done), then hangs that Redis (SIGSTOP) until t's cleanup.
func hungWorld(t testing.TB, s Stack, set func(*Server), method string, warm *testpb.OrderRequest) *world {
	t.Helper()
	srv := redistest.Start(t)
	w := worldOn(s, NewEnvOn(t, "rpcsuite", srv, defaultsClient(t, srv.Addr))).serve(t, set)
	if r := w.call(testCtx(t), method, warm); r.Code != OK || r.Key() == "" {
		t.Fatalf("warm-up %s with Redis up: %v", method, r)
	}
	if err := srv.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	t.Cleanup(func() { srv.Resume() }) // before the Locker closes (cleanups run last first)
	return w
}

// timed makes the call and returns its reply and how long it took.
func timed(ctx context.Context, w *world, method string, r *testpb.OrderRequest) (Reply, time.Duration) {
	start := time.Now()
	rep := w.call(ctx, method, r)
	return rep, time.Since(start)
}

// checkUnavailable: an Unavailable answer asks the client to come back
// soon, as the HTTP adapters' 503 with Retry-After: 1 does — a RetryInfo
// of rpclock.UnavailableRetryAfter on every stack, and Retry-After "1"
// where the stack carries it — and names neither Redis's text nor Go's.
func checkUnavailable(t testing.TB, s Stack, what string, r Reply) {
	t.Helper()
	if r.Code != Unavailable {
		t.Fatalf("%s: %v, want Unavailable", what, r)
	}
	if !r.RetryInfo || r.RetryDelay != rpclock.UnavailableRetryAfter {
		t.Errorf("%s: %v, want a RetryInfo of %v (the HTTP adapters' 503 says Retry-After: 1)", what, r, rpclock.UnavailableRetryAfter)
	}
	if s.RetryAfterIn != Nowhere && r.RetryAfter(s.RetryAfterIn) != "1" {
		t.Errorf("%s: %v, want Retry-After \"1\" in the response's %s", what, r, where(s.RetryAfterIn))
	}
	if name := GoName(r.Message); name != "" {
		t.Errorf("%s: message %q names Go's %q", what, r.Message, name)
	}
	for _, leak := range []string{"127.0.0.1", "refused", "EOF", "timeout", "lockgate:"} {
		if strings.Contains(r.Message, leak) {
			t.Errorf("%s: message %q carries Redis's or core's text (%q): that is for the log", what, r.Message, leak)
		}
	}
}

func where(in Where) string {
	if in == InTrailer {
		return "trailer"
	}
	return "header"
}

// checkNoRetry: an answer that retrying cannot mend (bad input, a server
// error) carries no RetryInfo nor Retry-After, and no Go name.
func checkNoRetry(t testing.TB, what string, r Reply) {
	t.Helper()
	if r.RetryInfo || r.RetryAfterHeader != "" || r.RetryAfterTrailer != "" {
		t.Errorf("%s: %v carries a retry hint, but retrying the same call cannot help", what, r)
	}
	if name := GoName(r.Message); name != "" {
		t.Errorf("%s: message %q names Go's %q", what, r.Message, name)
	}
}

// logLine returns the one line of logs containing every one of has, and
// fails t unless there is exactly one.
func logLine(t testing.TB, logs string, has ...string) string {
	t.Helper()
	var found []string
	for _, ln := range strings.Split(logs, "\n") {
		all := ln != ""
		for _, h := range has {
			all = all && strings.Contains(ln, h)
		}
		if all {
			found = append(found, ln)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d log lines with %q, want 1: %q", len(found), has, logs)
	}
	return found[0]
}

// testRefusedAtOnce: a Redis whose port is closed (every dial refused),
// reached with go-redis's default client, is answered Unavailable at once
// — within answerBound, not after the Order method's 2s wait — with the
// answers of every Unavailable (checkUnavailable); the handler does not
// run; one error line names the cause ("connection refused") and the
// method, and no Go type. A fail-open method runs without a lease as
// fast. The control: the same call on a hung Redis (not refused) waits
// out its 2s budget, so an answer as slow as a refusal's was before
// (2.05s, "no answer within the wait budget") fails the bound.
func testRefusedAtOnce(t *testing.T, s Stack) {
	srv := redistest.Start(t)
	srv.Stop() // its port closed: every dial is refused
	var logs locktest.SyncBuffer
	w := worldOn(s, NewEnvOn(t, "rpcsuite", srv, defaultsClient(t, srv.Addr))).serve(t, func(sv *Server) {
		sv.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	ctx := testCtx(t)

	r, took := timed(ctx, w, "Order", req("u1", 7, 0))
	t.Logf("Order on a refusing Redis (wait 2s): %v after %v", r, took)
	checkUnavailable(t, s, "Order on a refusing Redis", r)
	if took >= answerBound {
		t.Fatalf("Order on a refusing Redis answered after %v, want at once (< %v), not after its 2s wait", took, answerBound)
	}
	if n := w.Service.Calls(); n != 0 {
		t.Fatalf("handler ran %d times on a refusing Redis, want 0", n)
	}
	line := logLine(t, logs.String(), "redis unavailable", "method="+FullMethod("Order"))
	if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "connection refused") {
		t.Fatalf("log line %q: want an error naming the cause, connection refused", line)
	}
	if name := GoName(line); name != "" {
		t.Fatalf("log line %q names Go's %q", line, name)
	}

	r, took = timed(ctx, w, "Relaxed", req("u1", 0, 0))
	t.Logf("fail-open Relaxed on a refusing Redis: %v after %v", r, took)
	if r.Code != OK || r.Key() != "" || took >= answerBound {
		t.Fatalf("fail-open Relaxed on a refusing Redis: %v after %v, want it run without a lease at once (< %v)", r, took, answerBound)
	}

	hw := hungWorld(t, s, nil, "Order", req("warm", 1, 0))
	r, took = timed(ctx, hw, "Order", req("u1", 7, 0))
	t.Logf("control: Order on a hung Redis (wait 2s): %v after %v", r, took)
	if r.Code != Unavailable || took < answerBound {
		t.Fatalf("control: Order on a hung Redis: %v after %v; want Unavailable at the end of its 2s wait, past the bound %v", r, took, answerBound)
	}
}

// testHungSingleAttempt: a single attempt (Rule.Wait core.NoWait, as
// TryLock) on a Redis that hangs (SIGSTOP), under go-redis's default
// client (ReadTimeout 3s, 3 retries), is Unavailable within the engine's
// attempt budget (core.WithAttemptTimeout, default 500ms) plus a grace
// (answerBound) — it once took 5–10s — with the answers of
// every Unavailable; its handler does not run and an error line names the
// method. The control: the same key under a rule that waits 2s, on the
// same hung Redis, answers only at the end of that wait, past the bound.
func testHungSingleAttempt(t *testing.T, s Stack) {
	var logs locktest.SyncBuffer
	w := hungWorld(t, s, func(sv *Server) {
		sv.Rules = []Rule{
			{Method: "Order", Key: "order:{user_id}:{voucher_id}", Wait: core.NoWait},
			{Method: "Quick", Key: "order:{user_id}:{voucher_id}", Wait: 2 * time.Second},
		}
		sv.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	}, "Order", req("warm", 1, 0))
	ctx := testCtx(t)
	before := w.Service.Calls()

	r, took := timed(ctx, w, "Order", req("u1", 7, 0))
	t.Logf("single attempt on a hung Redis: %v after %v", r, took)
	checkUnavailable(t, s, "a single attempt on a hung Redis", r)
	if took >= answerBound {
		t.Fatalf("a single attempt on a hung Redis answered after %v, want within the 500ms attempt budget plus a grace (< %v)", took, answerBound)
	}
	if w.Service.Calls() != before {
		t.Fatal("the handler ran on a hung Redis")
	}
	line := logLine(t, logs.String(), "redis unavailable", "method="+FullMethod("Order"))
	t.Logf("log: %s", line)
	if !strings.Contains(line, "level=ERROR") {
		t.Fatalf("log line %q, want an error", line)
	}
	if name := GoName(line); name != "" {
		t.Fatalf("log line %q names Go's %q", line, name)
	}

	r, took = timed(ctx, w, "Quick", req("u1", 7, 0))
	t.Logf("control: a 2s wait on the hung Redis: %v after %v", r, took)
	if r.Code != Unavailable || took < answerBound {
		t.Fatalf("control: a 2s wait on a hung Redis: %v after %v; want Unavailable at the end of the wait, past the bound %v", r, took, answerBound)
	}
}

// testFieldTypoIsSetupError: a key naming a field its method's request
// does not have (a typo: {user_idd}, {field.item.skuu}) can never be
// filled; it is the server's error, said by the interceptor's constructor
// naming the method, the Go rule and the placeholder — fail-open or not —
// never an InvalidArgument per call. (The HTTP adapters can only say so
// at setup where they see the route, and answer 500 otherwise; an RPC
// interceptor always has the request's descriptor. connectlock's rules
// read at the first call from a handler's schema are answered Internal
// and logged once: its TestSchemaOutsideRegistry.) The control: the same
// rules with the right names build, and serve under their lock.
func testFieldTypoIsSetupError(t *testing.T, s Stack) {
	w := newWorld(t, s)
	for _, tc := range []struct {
		name     string
		method   string
		key      string
		part     string
		right    string
		failOpen bool
	}{
		{"field", "Order", "order:{user_idd}:{voucher_id}", "user_idd", "order:{user_id}:{voucher_id}", false},
		{"typed field, fail-open", "Order", "order:{vouchr_id:int}", "vouchr_id", "order:{voucher_id:int}", true},
		{"nested field", "Nested", "sku:{field.item.skuu}:{md.x-user-id}", "skuu", "sku:{field.item.sku}:{md.x-user-id}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := Rule{Method: tc.method, Key: tc.key, FailOpen: tc.failOpen}
			err := s.Build(w.Locker, Server{Locker: w.Locker, Service: w.Service, Rules: []Rule{rule}})
			if err == nil {
				t.Fatalf("a rule of %s with key %q built: its calls could never be locked", tc.method, tc.key)
			}
			for _, want := range []string{FullMethod(tc.method), "Go rule", tc.part} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("setup error %q does not name %q", err, want)
				}
			}
			rule.Key = tc.right
			if err := s.Build(w.Locker, Server{Locker: w.Locker, Service: w.Service, Rules: []Rule{rule}}); err != nil {
				t.Fatalf("control: the right name %q: %v", tc.right, err)
			}
		})
	}
	w.serve(t, func(sv *Server) {
		sv.Rules = []Rule{{Method: "Order", Key: "order:{voucher_id:int}", FailOpen: true}}
	})
	if r := w.call(testCtx(t), "Order", req("u1", 7, 0)); r.Code != OK || r.Key() != "order:7" {
		t.Fatalf("control: Order under the right name = %v, want key order:7", r)
	}
}

// testBadBody: a request body that does not decode, served with the
// stack's plain codecs (connectlock.PlainCodecs), is InvalidArgument
// saying "invalid request body", naming the field where the decoder knows
// it (JSON), with no Go type or package name (GoName) and no retry hint;
// no handler runs and nothing is locked. Controls: the raw path itself
// works (a valid JSON body is served under its lock), and without the
// plain codecs — the default — the same bodies are answered with
// connect's own text, which names Go types ("unmarshal into
// *testpb.OrderRequest: proto: ..."), so the check can fail. That default
// is why PlainCodecs is opt-in: the body is decoded by the handler's
// codec before any interceptor runs (the interceptor never sees it), and
// replacing the codecs is the server's choice, which would override a
// codec of its own. Stacks whose client cannot send a raw body (grpc-go,
// which decodes and answers such a body itself) skip it.
func testBadBody(t *testing.T, s Stack) {
	w := newWorld(t, s).serve(t, func(sv *Server) { sv.PlainCodecs = true })
	rc, ok := w.client.(RawClient)
	if !ok {
		t.Skipf("%s: its client sends no raw body (not a RawClient)", s.Name)
	}
	ctx := testCtx(t)
	type body struct {
		name  string
		codec string
		data  []byte
		field string // the field the answer names, "" for none
	}
	bad := []body{
		{"JSON, a string for an int64", "json", []byte(`{"userId": "u1", "voucherId": "seven"}`), "voucherId"},
		{"JSON, not an object", "json", []byte(`[1, 2]`), ""},
		{"binary, not protobuf", "proto", []byte{0xff, 0xff, 0xff, 0xff}, ""},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			r := rc.CallRaw(ctx, "Order", b.codec, b.data)
			if r.Code != InvalidArgument || !strings.Contains(r.Message, "invalid request body") {
				t.Fatalf("got %v, want InvalidArgument \"invalid request body\"", r)
			}
			if b.field != "" && !strings.Contains(r.Message, "field "+b.field) {
				t.Errorf("message %q does not name the field %s", r.Message, b.field)
			}
			checkNoRetry(t, "a body that does not decode", r)
		})
	}
	if n := w.Service.Calls(); n != 0 {
		t.Fatalf("handler ran %d times on bodies that do not decode", n)
	}
	if keys := w.LockKeys(t); len(keys) != 0 {
		t.Fatalf("bodies that do not decode locked %v", keys)
	}
	if r := rc.CallRaw(ctx, "Order", "json", []byte(`{"userId": "u1", "voucherId": "7"}`)); r.Code != OK || r.Key() != "order:u1:7" {
		t.Fatalf("control: a valid JSON body = %v, want it served under order:u1:7", r)
	}

	dw := newWorld(t, s).serve(t, nil)
	drc := dw.client.(RawClient)
	for _, b := range []body{bad[0], bad[2]} {
		r := drc.CallRaw(ctx, "Order", b.codec, b.data)
		t.Logf("control, connect's own codecs, %s: %v", b.name, r)
		if r.Code != InvalidArgument || GoName(r.Message) == "" {
			t.Fatalf("control, connect's own codecs, %s: %v; want InvalidArgument naming a Go type, as connect's codecs do (if no longer, PlainCodecs may no longer be needed)", b.name, r)
		}
	}
}

// retryAfterSecs is the Retry-After (whole seconds, at least 1) of a
// RetryInfo of d, as core.RetryAfterSeconds rounds core's estimate.
func retryAfterSecs(d time.Duration) string {
	return strconv.Itoa(max(int((d+time.Second-1)/time.Second), 1))
}
