package grpclock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/rpclock"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLockStatusMapping: every outcome core reports maps to the status
// that says what happened, fail-open applies to a Redis that is
// unavailable only, and error text from core and Redis reaches the logger
// but never the client. Outcomes that real Redis 7 cannot produce here
// (ErrUnsupported, joined errors at chosen moments, ErrInvalid) are built
// by hand as core returns them.
func TestLockStatusMapping(t *testing.T) {
	const secret = "10.9.8.7:6379"
	busy := &core.BusyError{Key: "k", RetryAfter: 1500 * time.Millisecond, HolderTTL: 20 * time.Second}
	unavailable := fmt.Errorf("%w: acquire: dial tcp %s: connection refused", core.ErrUnavailable, secret)
	for _, tc := range []struct {
		name     string
		err      error
		code     codes.Code
		failOpen bool
		logged   string // level logged, "" for none
		msg      string // substring of the status message
	}{
		{"busy", busy, codes.ResourceExhausted, false, "", "busy"},
		{"busy, then the deadline", errors.Join(busy, context.DeadlineExceeded), codes.DeadlineExceeded, false, "", ""},
		{"busy, then cancelled", errors.Join(busy, context.Canceled), codes.Canceled, false, "", ""},
		{"unavailable", unavailable, codes.Unavailable, true, "ERROR", "unavailable"},
		{"unavailable, then the deadline", errors.Join(unavailable, context.DeadlineExceeded), codes.Unavailable, false, "ERROR", "unavailable"},
		{"unavailable, then cancelled", errors.Join(unavailable, context.Canceled), codes.Unavailable, false, "ERROR", "unavailable"},
		{"closed", core.ErrClosed, codes.Unavailable, false, "", "shutting down"},
		{"unsupported", fmt.Errorf("%w: server %s is 6.2.0", core.ErrUnsupported, secret), codes.Unavailable, false, "ERROR", "unavailable"},
		{"deadline before any answer", context.DeadlineExceeded, codes.DeadlineExceeded, false, "", ""},
		{"cancelled before any answer", context.Canceled, codes.Canceled, false, "", ""},
		{"cancelled by a lost lease", errors.Join(context.Canceled, core.ErrLockLost), codes.Canceled, false, "", ""},
		{"invalid", fmt.Errorf("%w: key at %s is 2000 bytes", core.ErrInvalid, secret), codes.Internal, false, "ERROR", "internal error"},
		{"unknown", fmt.Errorf("boom at %s", secret), codes.Internal, false, "ERROR", "internal error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			i := &Interceptor{gate: rpclock.Gate{Name: "grpclock", Logger: slog.New(slog.NewTextHandler(&logs, nil))}}
			m := &rpclock.Method{Name: "/pkg.S/M", FailOpen: true}
			if got := rpclock.FailOpen(tc.err); got != tc.failOpen {
				t.Errorf("FailOpen(%v) = %v, want %v", tc.err, got, tc.failOpen)
			}
			st := status.Convert(failureStatus(i.gate.LockFailure(context.Background(), m, tc.err)))
			if st.Code() != tc.code {
				t.Fatalf("status %v, want %v", st.Code(), tc.code)
			}
			if !strings.Contains(st.Message(), tc.msg) {
				t.Errorf("message %q does not contain %q", st.Message(), tc.msg)
			}
			if strings.Contains(st.Message(), secret) || strings.Contains(st.Message(), "lockgate:") {
				t.Errorf("internal error text reached the client: %q", st.Message())
			}
			out := logs.String()
			switch {
			case tc.logged == "" && out != "":
				t.Errorf("logged %q, want nothing", out)
			case tc.logged != "" && (!strings.Contains(out, "level="+tc.logged) || !strings.Contains(out, secret)):
				t.Errorf("log %q: want level %s with the error's text", out, tc.logged)
			}
			if tc.code == codes.ResourceExhausted {
				var ri *errdetails.RetryInfo
				for _, d := range st.Details() {
					if r, ok := d.(*errdetails.RetryInfo); ok {
						ri = r
					}
				}
				if ri == nil || ri.GetRetryDelay().AsDuration() != busy.RetryAfter {
					t.Fatalf("RetryInfo %v, want the estimate %v (not the holder's TTL %v)", ri, busy.RetryAfter, busy.HolderTTL)
				}
			}
		})
	}
}
