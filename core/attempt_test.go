package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// On a hung Redis (SIGSTOP) with go-redis's defaults (a 3s read timeout)
// and a context without a deadline, every single call returns within the
// attempt timeout (500ms by default) plus 50ms, as ErrUnavailable: TryLock,
// Lock with NoWait, Extend, TTL, Inspect, ForceRelease (before: TryLock
// 10s, Lock(NoWait) 5s). Control: a Locker whose attempt timeout is 1.5s
// waits that long, so the bound the test sees is the option's.
func TestSingleAttemptsOnHungRedis(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  []core.Option
		bound time.Duration
	}{
		{"default", nil, core.DefaultAttemptTimeout},
		{"control: 1.5s", []core.Option{core.WithAttemptTimeout(1500 * time.Millisecond)}, 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			l := locktest.Locker(t, defaultsClient(t, srv), tc.opts...)
			ctx := context.Background() // no deadline: only the Locker bounds the calls
			locktest.Warm(t, l)
			held, err := l.Lock(ctx, "attempt:held", core.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			pause(t, srv)
			calls := []struct {
				name string
				call func() error
			}{
				{"TryLock", func() error { _, err := l.TryLock(ctx, "attempt:k"); return err }},
				{"Lock(NoWait)", func() error { _, err := l.Lock(ctx, "attempt:k", core.WithWait(core.NoWait)); return err }},
				{"Extend", func() error { return held.Extend(ctx, time.Minute) }},
				{"TTL", func() error { _, err := held.TTL(ctx); return err }},
				{"Inspect", func() error { _, err := l.Inspect(ctx, "attempt:held"); return err }},
				{"ForceRelease", func() error { _, err := l.ForceRelease(ctx, "attempt:held"); return err }},
			}
			if tc.bound != core.DefaultAttemptTimeout {
				calls = calls[:1] // the control needs one call to show the bound moves
			}
			for _, c := range calls {
				start := time.Now()
				err := c.call()
				took := time.Since(start)
				t.Logf("%s on a hung Redis: %v after %v", c.name, err, took.Round(time.Millisecond))
				if !errors.Is(err, core.ErrUnavailable) {
					t.Errorf("%s on a hung Redis = %v, want ErrUnavailable", c.name, err)
				}
				if took > tc.bound+budgetSlack/2 {
					t.Errorf("%s took %v, over the attempt timeout %v", c.name, took, tc.bound)
				}
				if took < tc.bound-50*time.Millisecond {
					t.Errorf("%s returned after %v, before the attempt timeout %v: not the bound under test", c.name, took, tc.bound)
				}
			}
		})
	}
}
