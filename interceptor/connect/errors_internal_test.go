package connectlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/internal/rpclock"
	"github.com/lockgate/lockgate/keyfunc"
)

// TestFailureCodes: every outcome core reports maps to the Connect code
// that says what happened (the package doc's table), fail-open applies to
// a Redis that is unavailable only, and error text from core and Redis
// reaches the logger but never the client. Outcomes that real Redis 7
// cannot produce here (ErrUnsupported, joined errors at chosen moments,
// ErrInvalid) are built by hand as core returns them.
func TestFailureCodes(t *testing.T) {
	const secret = "10.9.8.7:6379"
	busy := &core.BusyError{Key: "k", RetryAfter: 1500 * time.Millisecond, HolderTTL: 20 * time.Second}
	unavailable := fmt.Errorf("%w: acquire: dial tcp %s: connection refused", core.ErrUnavailable, secret)
	for _, tc := range []struct {
		name     string
		err      error
		code     connect.Code
		failOpen bool
		logged   string // level logged, "" for none
		msg      string // substring of the error's message
	}{
		{"busy", busy, connect.CodeResourceExhausted, false, "", "busy"},
		{"busy, then the deadline", errors.Join(busy, context.DeadlineExceeded), connect.CodeDeadlineExceeded, false, "", ""},
		{"busy, then cancelled", errors.Join(busy, context.Canceled), connect.CodeCanceled, false, "", ""},
		{"unavailable", unavailable, connect.CodeUnavailable, true, "ERROR", "unavailable"},
		{"unavailable, then the deadline", errors.Join(unavailable, context.DeadlineExceeded), connect.CodeUnavailable, false, "ERROR", "unavailable"},
		{"unavailable, then cancelled", errors.Join(unavailable, context.Canceled), connect.CodeUnavailable, false, "ERROR", "unavailable"},
		{"closed", core.ErrClosed, connect.CodeUnavailable, false, "", "shutting down"},
		{"unsupported", fmt.Errorf("%w: server %s is 6.2.0", core.ErrUnsupported, secret), connect.CodeUnavailable, false, "ERROR", "unavailable"},
		{"deadline before any answer", context.DeadlineExceeded, connect.CodeDeadlineExceeded, false, "", ""},
		{"cancelled before any answer", context.Canceled, connect.CodeCanceled, false, "", ""},
		{"cancelled by a lost lease", errors.Join(context.Canceled, core.ErrLockLost), connect.CodeCanceled, false, "", ""},
		{"invalid", fmt.Errorf("%w: key at %s is 2000 bytes", core.ErrInvalid, secret), connect.CodeInternal, false, "ERROR", "internal error"},
		{"unknown", fmt.Errorf("boom at %s", secret), connect.CodeInternal, false, "ERROR", "internal error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs locktest.SyncBuffer
			g := rpclock.Gate{Name: "connectlock", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			m := &rpclock.Method{Name: "/pkg.S/M", FailOpen: true}
			if got := rpclock.FailOpen(tc.err); got != tc.failOpen {
				t.Errorf("FailOpen(%v) = %v, want %v", tc.err, got, tc.failOpen)
			}
			var ce *connect.Error
			if !errors.As(failureError(g.LockFailure(context.Background(), m, tc.err)), &ce) {
				t.Fatal("not a *connect.Error")
			}
			if ce.Code() != tc.code {
				t.Fatalf("code %v, want %v", ce.Code(), tc.code)
			}
			if !strings.Contains(ce.Message(), tc.msg) {
				t.Errorf("message %q does not contain %q", ce.Message(), tc.msg)
			}
			if strings.Contains(ce.Message(), secret) || strings.Contains(ce.Message(), "lockgate:") {
				t.Errorf("internal error text reached the client: %q", ce.Message())
			}
			out := logs.String()
			switch {
			case tc.logged == "" && out != "":
				t.Errorf("logged %q, want nothing", out)
			case tc.logged != "" && (!strings.Contains(out, "level="+tc.logged) || !strings.Contains(out, secret) || !strings.Contains(out, "connectlock:")):
				t.Errorf("log %q: want level %s with the error's text", out, tc.logged)
			}
			var ri *errdetails.RetryInfo
			for _, d := range ce.Details() {
				if v, err := d.Value(); err == nil {
					if r, ok := v.(*errdetails.RetryInfo); ok {
						ri = r
					}
				}
			}
			switch {
			case tc.code == connect.CodeResourceExhausted && (ri == nil || ri.GetRetryDelay().AsDuration() != busy.RetryAfter):
				t.Fatalf("RetryInfo %v, want the estimate %v (not the holder's TTL %v)", ri, busy.RetryAfter, busy.HolderTTL)
			case tc.code != connect.CodeResourceExhausted && ri != nil:
				t.Fatalf("RetryInfo %v on a %v error", ri, tc.code)
			}
		})
	}
	t.Run("invalid key", func(t *testing.T) {
		m := &rpclock.Method{Name: "/pkg.S/M"}
		var ce *connect.Error
		if !errors.As(failureError(rpclock.KeyFailure(m, &keyfunc.Error{Part: "user_id", Err: keyfunc.ErrMissing})), &ce) ||
			ce.Code() != connect.CodeInvalidArgument || !strings.Contains(ce.Message(), "/pkg.S/M") || !strings.Contains(ce.Message(), "user_id") {
			t.Fatalf("key failure: %v, want InvalidArgument naming the method and user_id", ce)
		}
	})
}

// TestHeaderMD: {md.name} reads the first value of the request header;
// a binary header ("-bin") is decoded from base64 as gRPC metadata is,
// and one that does not decode is an invalid value; an absent header is
// missing.
func TestHeaderMD(t *testing.T) {
	h := http.Header{}
	h.Add("X-User-Id", "u1")
	h.Add("X-User-Id", "u2")
	h.Set("X-Tenant-Bin", connect.EncodeBinaryHeader([]byte("t:1")))
	h.Set("X-Bad-Bin", "%%%")
	md := headerMD(h)
	for _, tc := range []struct {
		name, value string
		ok          bool
		err         error
	}{
		{"x-user-id", "u1", true, nil},
		{"X-USER-ID", "u1", true, nil},
		{"x-tenant-bin", "t:1", true, nil},
		{"x-bad-bin", "", false, keyfunc.ErrInvalidValue},
		{"x-none", "", false, nil},
	} {
		v, ok, err := md(tc.name)
		if v != tc.value || ok != tc.ok || !errors.Is(err, tc.err) {
			t.Errorf("md(%q) = %q, %v, %v; want %q, %v, %v", tc.name, v, ok, err, tc.value, tc.ok, tc.err)
		}
	}
}
