package core_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// A lease whose context ends without Unlock is no longer renewed: its lock
// expires within one TTL and another owner gets it, the lease is lost
// (ErrLockLost, told to the Observer), and the log says so once per
// pattern. Control: the same lease whose context lives on is renewed past
// several TTLs, and the other owner stays out.
func TestForgottenUnlockIsNotRenewed(t *testing.T) {
	t.Parallel()
	// 1s: the control's renewals (every TTL/3) keep it through a stall of
	// over half a second, which a full -race run on two cores can have.
	const ttl = time.Second
	for _, forget := range []bool{true, false} {
		name := "forgotten"
		if !forget {
			name = "control"
		}
		t.Run(name, func(t *testing.T) {
			srv := redistest.Start(t)
			var buf syncBuffer
			rec := &locktest.Events{}
			l, _ := locktest.NewLocker(t, srv, core.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))), core.WithObserver(rec))
			other, _ := locktest.NewLocker(t, srv)
			ctx := locktest.Context(t)
			reqCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			var leases []*core.Lease
			for _, key := range []string{"forgot:1", "forgot:2"} {
				s, err := l.Lock(reqCtx, key, core.WithTTL(ttl), core.WithPattern("forgot:{n}"))
				if err != nil {
					t.Fatal(err)
				}
				leases = append(leases, s)
			}
			start := time.Now()
			if forget {
				cancel() // the request ends; nobody calls Unlock
			}
			got, err := other.Lock(ctx, "forgot:1", core.WithWait(4*ttl))
			if !forget {
				if err == nil {
					got.Unlock(ctx)
					t.Fatalf("control: another owner took a renewed lease's lock after %v", time.Since(start))
				}
				// Busy; on a loaded machine the last attempt's answer may
				// come after the budget (unavailable): either way, out.
				if !errors.Is(err, core.ErrNotObtained) && !errors.Is(err, core.ErrUnavailable) {
					t.Fatalf("control: %v", err)
				}
				for _, s := range leases {
					if err := s.Unlock(ctx); err != nil {
						t.Fatalf("control: Unlock of a renewed lease: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("another owner, within %v of the context's end: %v", 4*ttl, err)
			}
			took := time.Since(start)
			got.Unlock(ctx)
			if took > ttl+300*time.Millisecond {
				t.Errorf("the forgotten lock was free after %v, want within one TTL (%v)", took, ttl)
			}
			for _, s := range leases {
				// Its loss is told once its validity ends (an Unlock before
				// then, of a lock not yet expired, would release it: the
				// second lease may have been renewed last).
				wctx, wcancel := context.WithTimeout(ctx, 2*ttl)
				_, seen := rec.Wait(wctx, func(e core.Event) bool { return e.Kind == core.EventLost && e.Key == s.Key() })
				wcancel()
				if !seen {
					t.Fatalf("the forgotten lease %s was not told lost within %v", s.Key(), 2*ttl)
				}
				if err := s.Unlock(ctx); !errors.Is(err, core.ErrLockLost) {
					t.Errorf("Unlock of the forgotten lease = %v, want ErrLockLost", err)
				}
			}
			lost := ofKind(rec, core.EventLost)
			if len(lost) != 2 || !errors.Is(lost[0].Err, core.ErrLockLost) {
				t.Errorf("lost events %+v, want both leases, ErrLockLost", lost)
			}
			if n := strings.Count(buf.String(), "without Unlock"); n != 1 {
				t.Errorf("the warning was logged %d times for one pattern, want once:\n%s", n, buf.String())
			}
		})
	}
}
