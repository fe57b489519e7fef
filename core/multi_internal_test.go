package core

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// A LockMulti lease one of whose locks was lost while the call took the
// others is returned with its Context already ended, cause ErrLockLost:
// not live for the moment context.AfterFunc takes to run.
func TestMultiOfLostPartEndsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var parts []*Lease
	for _, key := range []string{"a", "b"} {
		h := &hold{key: key, l: &Locker{epoch: time.Now()}}
		h.count.Store(1)
		h.validUntil.Store(math.MaxInt64)
		parts = append(parts, newLease(h, ctx, false))
	}
	parts[0].cancel(ErrLockLost)
	m := newMulti(ctx, parts)
	if m.Context().Err() == nil {
		t.Fatal("a LockMulti lease with a lost lock was returned live")
	}
	if cause := context.Cause(m.Context()); !errors.Is(cause, ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", cause)
	}
}
