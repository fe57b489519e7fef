package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// Cancellation while waiting, Redis unreachable and a busy TryLock
// are three distinguishable outcomes.
func TestThreeOutcomes(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, _ := locktest.NewLocker(t, srv)
	b, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	held, err := a.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("busy", func(t *testing.T) {
		_, err := b.TryLock(ctx, "k")
		if !errors.Is(err, core.ErrNotObtained) || errors.Is(err, core.ErrUnavailable) || errors.Is(err, context.Canceled) {
			t.Fatalf("TryLock on a held key = %v", err)
		}
		var be *core.BusyError
		if !errors.As(err, &be) || be.Key != "k" || be.RetryAfter <= 0 || be.RetryAfter > core.DefaultTTL {
			t.Fatalf("busy error %#v: want key and the holder's TTL", be)
		}
	})

	t.Run("cancelled while waiting", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := b.Lock(cctx, "k", core.WithWait(time.Minute))
			done <- err
		}()
		// Cancel once the waiter is queued: its Locker subscribed.
		waitSubscribers(t, srv.Client(t), "lockgate:{k}", 1)
		cancel()
		err := <-done
		if !errors.Is(err, core.ErrNotObtained) || !errors.Is(err, context.Canceled) || errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("cancelled Lock = %v: want ErrNotObtained and context.Canceled", err)
		}
	})

	t.Run("wait budget ends", func(t *testing.T) {
		_, err := b.Lock(ctx, "k", core.WithWait(100*time.Millisecond))
		if !errors.Is(err, core.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock past its budget = %v", err)
		}
		if _, ok := core.RetryAfter(err); !ok {
			t.Fatalf("no RetryAfter in %v", err)
		}
	})

	t.Run("ctx deadline before the budget", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := b.Lock(dctx, "k", core.WithWait(time.Minute))
		if !errors.Is(err, core.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock past ctx deadline = %v, want ErrNotObtained joined with DeadlineExceeded", err)
		}
	})

	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("redis unreachable", func(t *testing.T) {
		srv.Stop()
		_, err := b.Lock(ctx, "k")
		if !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrNotObtained) {
			t.Fatalf("Lock with Redis down = %v: want ErrUnavailable only", err)
		}
		_, err = b.TryLock(ctx, "k")
		if !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("TryLock with Redis down = %v", err)
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		s, err := b.Lock(ctx, "k")
		if err != nil {
			t.Fatalf("after restart: %v", err)
		}
		s.Unlock(ctx)
	})
}

// countingHook counts the commands a client sends.
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// Bad input is an ErrInvalid error naming the argument; nothing is sent.
// A bad Locker option is an error from New, not from every Lock.
func TestBadInput(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	hook := &countingHook{}
	c.AddHook(hook)
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	cases := []struct {
		name, key, want string
		opts            []core.LockOption
	}{
		{"empty key", "", "key is empty", nil},
		{"long key", strings.Repeat("x", core.MaxKeyLen+1), "over the limit", nil},
		{"short ttl", "k", "ttl", []core.LockOption{core.WithTTL(time.Millisecond)}},
		{"negative wait", "k", "wait", []core.LockOption{core.WithWait(-time.Second)}},
		{"zero release timeout", "k", "release timeout", []core.LockOption{core.WithReleaseTimeout(0)}},
		{"nil option", "k", "nil option", []core.LockOption{nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, lock := range []func(context.Context, string, ...core.LockOption) (*core.Lease, error){l.Lock, l.TryLock} {
				s, err := lock(ctx, tc.key, tc.opts...)
				if s != nil || !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want ErrInvalid mentioning %q", err, tc.want)
				}
			}
			if len(tc.opts) > 0 {
				if _, err := core.Combine(tc.opts...); !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Combine = %v, want ErrInvalid mentioning %q", err, tc.want)
				}
			}
		})
	}
	if n := hook.n.Load(); n != 0 {
		t.Fatalf("%d commands sent for bad input, want 0", n)
	}
	if err := (*core.Lease)(nil).Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("nil lease Unlock = %v", err)
	}
	select {
	case <-(*core.Lease)(nil).Done():
	default:
		t.Fatal("Done of a nil lease is not closed")
	}
}

// New reports a nil client and every bad Locker option itself.
func TestNewRejects(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	var nilClient *redis.Client
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		opts   []core.Option
		want   string
	}{
		{"nil client", nil, nil, "nil redis client"},
		{"typed nil client", nilClient, nil, "nil redis client"},
		{"brace in prefix", c, []core.Option{core.WithPrefix("a{b")}, "prefix"},
		{"long prefix", c, []core.Option{core.WithPrefix(strings.Repeat("p", core.MaxPrefixLen+1))}, "prefix"},
		{"drift factor", c, []core.Option{core.WithDriftFactor(0.9)}, "drift factor"},
		{"fence window", c, []core.Option{core.WithFenceWindow(time.Millisecond)}, "fence window"},
		{"default ttl", c, []core.Option{core.WithTTL(time.Millisecond)}, "ttl"},
		{"default wait", c, []core.Option{core.WithWait(-2)}, "wait"},
		{"nil option", c, []core.Option{nil}, "nil option"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := core.New(tc.client, tc.opts...)
			if l != nil || !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, %v; want ErrInvalid mentioning %q", l, err, tc.want)
			}
		})
	}
	// Control: the same client with good options is accepted.
	l, err := core.New(c, core.WithPrefix("ok:"), core.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{&core.BusyError{RetryAfter: 0}, 1},
		{&core.BusyError{RetryAfter: time.Millisecond}, 1},
		{&core.BusyError{RetryAfter: time.Second}, 1},
		{&core.BusyError{RetryAfter: time.Second + time.Millisecond}, 2},
		{fmt.Errorf("wrapped: %w", &core.BusyError{RetryAfter: 2500 * time.Millisecond}), 3},
		{core.ErrUnavailable, 1},
	} {
		if got := core.RetryAfterSeconds(tc.err); got != tc.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
