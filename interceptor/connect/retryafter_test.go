package connectlock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/lockgate/lockgate/core"
	connectlock "github.com/lockgate/lockgate/interceptor/connect"
	"github.com/lockgate/lockgate/internal/rpclock"
)

// TestRetryAfterHeader: the busy answer carries the HTTP Retry-After
// header the HTTP adapters send (beside RetryInfo), the unavailable one
// (HTTP 503 over Connect) a short "1"; the control, a key error, none.
func TestRetryAfterHeader(t *testing.T) {
	busy := fmt.Errorf("held: %w", core.ErrNotObtained)
	for _, c := range []struct {
		f    *rpclock.Failure
		want string
	}{
		{&rpclock.Failure{Outcome: rpclock.Busy, Err: busy, Message: "m is busy", RetryAfter: 2 * time.Second, HasRetryAfter: true}, fmt.Sprint(core.RetryAfterSeconds(busy))},
		{&rpclock.Failure{Outcome: rpclock.Unavailable, Err: core.ErrUnavailable, Message: "m: lock service unavailable"}, "1"},
		{&rpclock.Failure{Outcome: rpclock.InvalidKey, Err: errors.New("x"), Message: "m: invalid lock key"}, ""},
	} {
		var ce *connect.Error
		if !errors.As(connectlock.FailureError(c.f), &ce) {
			t.Fatal("not a *connect.Error")
		}
		if got := ce.Meta().Get("Retry-After"); got != c.want || (c.want != "" && got == "") {
			t.Errorf("%v: Retry-After %q, want %q", c.f.Outcome, got, c.want)
		}
	}
}
