package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// TestRPCOutcomeDeadline: an order cut by the request's deadline (a DB
// call stopped by a 1-5ms deadline) is DeadlineExceeded, not Internal;
// the control, another failure on a live request, stays Internal.
func TestRPCOutcomeDeadline(t *testing.T) {
	cfg := Config{Logger: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	for _, err := range []error{
		fmt.Errorf("insert order: %w", context.DeadlineExceeded),
		errors.New("timeout: context already done"), // a driver's own text
	} {
		if code, _ := cfg.rpcOutcome(ctx, err); code != codes.DeadlineExceeded {
			t.Errorf("%v under an expired deadline: %v, want DeadlineExceeded", err, code)
		}
	}
	if code, _ := cfg.rpcOutcome(context.Background(), errors.New("boom")); code != codes.Internal {
		t.Errorf("control: %v, want Internal", code)
	}
}
