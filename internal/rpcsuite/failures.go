package rpcsuite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/internal/rpclock"
	"github.com/lockgate/lockgate/keyfunc"
)

// RunFailures checks an interceptor's mapping of failed acquisitions to
// what its client is told, given as reply (the package's mapping of f —
// a gRPC status, a *connect.Error — read as the suite's client reads an
// error; reply may fail t when the error is not of the framework's type):
// every outcome core reports maps to the code that says what happened
// (a busy lock with a RetryInfo carrying core's estimate, Unavailable with
// one of rpclock.UnavailableRetryAfter, no other code with one), no
// message names a Go type or package (GoName), fail-open applies to a
// Redis that is unavailable only, and error text from core and Redis
// reaches the logger (whose lines name name, the interceptor: "grpclock",
// "connectlock") but never the client;
// an invalid key is InvalidArgument naming the method and the placeholder.
// Outcomes that real Redis 7 cannot produce here (ErrUnsupported, joined
// errors at chosen moments, ErrInvalid) are built by hand as core returns
// them. It runs one subtest per outcome.
func RunFailures(t *testing.T, name string, reply func(t testing.TB, f *rpclock.Failure) Reply) {
	t.Helper()
	const secret = "10.9.8.7:6379"
	busy := &core.BusyError{Key: "k", RetryAfter: 1500 * time.Millisecond, HolderTTL: 20 * time.Second}
	unavailable := fmt.Errorf("%w: acquire: dial tcp %s: connection refused", core.ErrUnavailable, secret)
	for _, tc := range []struct {
		name     string
		err      error
		code     Code
		failOpen bool
		logged   string // level logged, "" for none
		msg      string // substring of the error's message
	}{
		{"busy", busy, ResourceExhausted, false, "", "busy"},
		{"busy, then the deadline", errors.Join(busy, context.DeadlineExceeded), DeadlineExceeded, false, "", ""},
		{"busy, then cancelled", errors.Join(busy, context.Canceled), Canceled, false, "", ""},
		{"unavailable", unavailable, Unavailable, true, "ERROR", "unavailable"},
		{"unavailable, then the deadline", errors.Join(unavailable, context.DeadlineExceeded), Unavailable, false, "ERROR", "unavailable"},
		{"unavailable, then cancelled", errors.Join(unavailable, context.Canceled), Unavailable, false, "ERROR", "unavailable"},
		{"closed", core.ErrClosed, Unavailable, false, "", "shutting down"},
		{"unsupported", fmt.Errorf("%w: server %s is 6.2.0", core.ErrUnsupported, secret), Unavailable, false, "ERROR", "unavailable"},
		{"deadline before any answer", context.DeadlineExceeded, DeadlineExceeded, false, "", ""},
		{"cancelled before any answer", context.Canceled, Canceled, false, "", ""},
		{"cancelled by a lost lease", errors.Join(context.Canceled, core.ErrLockLost), Canceled, false, "", ""},
		{"invalid", fmt.Errorf("%w: key at %s is 2000 bytes", core.ErrInvalid, secret), Internal, false, "ERROR", "internal error"},
		{"unknown", fmt.Errorf("boom at %s", secret), Internal, false, "ERROR", "internal error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs locktest.SyncBuffer
			g := rpclock.Gate{Name: name, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			m := &rpclock.Method{Name: "/pkg.S/M", FailOpen: true}
			if got := rpclock.FailOpen(tc.err); got != tc.failOpen {
				t.Errorf("FailOpen(%v) = %v, want %v", tc.err, got, tc.failOpen)
			}
			r := reply(t, g.LockFailure(context.Background(), m, tc.err))
			if r.Code != tc.code {
				t.Fatalf("code %v, want %v", r.Code, tc.code)
			}
			if !strings.Contains(r.Message, tc.msg) {
				t.Errorf("message %q does not contain %q", r.Message, tc.msg)
			}
			if strings.Contains(r.Message, secret) || strings.Contains(r.Message, "lockgate:") {
				t.Errorf("internal error text reached the client: %q", r.Message)
			}
			out := logs.String()
			switch {
			case tc.logged == "" && out != "":
				t.Errorf("logged %q, want nothing", out)
			case tc.logged != "" && (!strings.Contains(out, "level="+tc.logged) || !strings.Contains(out, secret) || !strings.Contains(out, name+":")):
				t.Errorf("log %q: want level %s with the error's text", out, tc.logged)
			}
			if name := GoName(r.Message); name != "" {
				t.Errorf("message %q names Go's %q", r.Message, name)
			}
			switch {
			case tc.code == ResourceExhausted && (!r.RetryInfo || r.RetryDelay != busy.RetryAfter):
				t.Fatalf("RetryInfo %v (delay %v), want the estimate %v (not the holder's TTL %v)", r.RetryInfo, r.RetryDelay, busy.RetryAfter, busy.HolderTTL)
			case tc.code == Unavailable && (!r.RetryInfo || r.RetryDelay != rpclock.UnavailableRetryAfter):
				t.Fatalf("RetryInfo %v (delay %v), want %v, the pause of the HTTP adapters' 503 (Retry-After: 1)", r.RetryInfo, r.RetryDelay, rpclock.UnavailableRetryAfter)
			case tc.code != ResourceExhausted && tc.code != Unavailable && r.RetryInfo:
				t.Fatalf("RetryInfo (delay %v) on a %v error", r.RetryDelay, tc.code)
			}
		})
	}
	t.Run("invalid key", func(t *testing.T) {
		m := &rpclock.Method{Name: "/pkg.S/M"}
		r := reply(t, rpclock.KeyFailure(m, &keyfunc.Error{Part: "user_id", Err: keyfunc.ErrMissing}))
		if r.Code != InvalidArgument || !strings.Contains(r.Message, "/pkg.S/M") || !strings.Contains(r.Message, "user_id") {
			t.Fatalf("key failure: %v, want InvalidArgument naming the method and user_id", r)
		}
		if r.RetryInfo {
			t.Fatalf("key failure: RetryInfo (delay %v): retrying the same input cannot help", r.RetryDelay)
		}
	})
}
