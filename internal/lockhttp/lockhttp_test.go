package lockhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/lockgate/lockgate/core"
)

// Every Lock outcome gets its own answer, and fail-open runs the handler
// only for an unavailable Redis with the request still live.
func TestDecide(t *testing.T) {
	live := context.Background()
	over, cancel := context.WithCancel(live)
	cancel()
	unavailable := fmt.Errorf("%w: acquire: i/o timeout", core.ErrUnavailable)
	for _, tc := range []struct {
		name     string
		err      error
		failOpen bool
		ctx      context.Context
		status   int
		msg      string
	}{
		{"busy", &core.BusyError{Key: "k"}, true, live, 429, MsgBusy},
		{"busy, ctx ended", errors.Join(&core.BusyError{Key: "k"}, context.Canceled), true, over, 429, MsgBusy},
		{"unavailable", unavailable, false, live, 503, MsgUnavailable},
		{"unavailable, fail-open", unavailable, true, live, 0, ""},
		{"unavailable, fail-open, request over", errors.Join(unavailable, context.Canceled), true, over, 503, MsgUnavailable},
		{"unavailable past the deadline", errors.Join(unavailable, context.DeadlineExceeded), false, live, 503, MsgUnavailable},
		{"closed, fail-open", core.ErrClosed, true, live, 503, MsgUnavailable},
		{"unsupported, fail-open", fmt.Errorf("%w: redis 6.2", core.ErrUnsupported), true, live, 503, MsgUnavailable},
		{"invalid, fail-open", core.ErrInvalid, true, live, 503, MsgUnavailable},
		{"deadline", context.DeadlineExceeded, true, live, 503, MsgDeadline},
		{"cancelled", context.Canceled, true, over, StatusClientClosedRequest, MsgCanceled},
		{"lost lease's context", errors.Join(context.Canceled, core.ErrLockLost), true, over, 503, MsgUnavailable},
		{"other", errors.New("boom"), true, live, 503, MsgUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.err, tc.failOpen, tc.ctx)
			if d.Status != tc.status {
				t.Fatalf("status %d, want %d", d.Status, tc.status)
			}
			if d.Status == 0 {
				if d.Log == "" {
					t.Fatal("fail-open is not logged")
				}
				return
			}
			if got := Message(d.Status, tc.err); got != tc.msg {
				t.Fatalf("message %q, want %q", got, tc.msg)
			}
			if d.Status == http.StatusServiceUnavailable && d.Log == "" {
				t.Fatal("a 503 is not logged")
			}
		})
	}
}
