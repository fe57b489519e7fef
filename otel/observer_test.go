package otellock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

const pattern = "order:{user}:{voucher}"

// noRetries is a client to addr that does not re-send failed commands.
func noRetries(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// Every outcome lands on its instrument with its attributes, on real
// Redis servers and real faults: acquired, reentered, busy, canceled,
// invalid, unavailable (connections refused); releases ok, failed and
// retried, and not_held (the hash deleted under the holder); renewals ok,
// failed (refused) and
// lost; lost not_held, expired and closed. held and waiters go back to
// zero. Keys carry a user id that no attribute may hold.
func TestEachOutcomeOnItsInstrument(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr)
	r := newRig(t)
	direct := srv.Client(t)
	l := r.locker(t, direct)
	other := r.locker(t, srv.Client(t))
	flaky := r.locker(t, noRetries(t, proxy.Addr))
	ctx := locktest.Context(t)
	p := core.WithPattern(pattern)
	key := "order:user-831204:7"

	s, err := l.Lock(ctx, key, p)
	if err != nil {
		t.Fatal(err)
	}
	in, err := l.Lock(s.Context(), key, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.TryLock(ctx, key, p); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("TryLock of a held lock = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	gave := make(chan error, 1)
	go func() {
		_, err := other.Lock(cctx, key, p, core.WithWait(20*time.Second))
		gave <- err
	}()
	r.event(t, "a waiter", locktest.Is(core.EventWaiting, key))
	if n := r.count(t, "lockgate.lock.waiters", "pattern="+pattern); n != 1 {
		t.Fatalf("lockgate.lock.waiters = %d while one Lock waits, want 1", n)
	}
	cancel()
	if err := <-gave; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter = %v", err)
	}
	if _, err := l.Lock(ctx, "", p); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("empty key = %v", err)
	}
	in.Unlock(ctx)
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// not_held: the hash is deleted under the holder before its Unlock.
	s2, err := l.Lock(ctx, "order:user-831204:8", p)
	if err != nil {
		t.Fatal(err)
	}
	direct.Del(ctx, "lockgate:{order:user-831204:8}")
	if err := s2.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock of a deleted lock = %v", err)
	}

	// lost, not_held: deleted while held; the next renewal finds it gone.
	s3, err := l.Lock(ctx, "order:user-831204:9", p, core.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r.event(t, "a renewal", func(e core.Event) bool {
		return e.Kind == core.EventRenewed && e.Key == "order:user-831204:9" && e.Err == nil
	})
	direct.Del(ctx, "lockgate:{order:user-831204:9}")
	within(t, s3.Done(), 5*time.Second, "the loss of a deleted lock")

	// failed renewals, then lost, expired; and unavailable: Redis refuses
	// connections.
	s4, err := flaky.Lock(ctx, "order:user-831204:10", p, core.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetRefuse(true)
	proxy.Cut()
	if _, err := flaky.Lock(ctx, "order:user-831204:11", p, core.WithWait(200*time.Millisecond)); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Lock with Redis refusing = %v", err)
	}
	within(t, s4.Done(), 5*time.Second, "the loss of a lease whose renewals fail")
	proxy.SetRefuse(false)

	// A release that fails, then its retry: two releases, one end of the hold.
	s5, err := flaky.Lock(ctx, "order:user-831204:13", p)
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetRefuse(true)
	proxy.Cut()
	if err := s5.Unlock(ctx); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Unlock with Redis refusing = %v", err)
	}
	proxy.SetRefuse(false)
	if err := s5.Unlock(ctx); err != nil {
		t.Fatalf("retried Unlock = %v", err)
	}

	// closed: Close ends a held lease.
	closing := r.locker(t, srv.Client(t))
	if _, err := closing.Lock(ctx, "order:user-831204:12", p); err != nil {
		t.Fatal(err)
	}
	closing.Close()

	for _, c := range []struct {
		name string
		attr []string
		want int
	}{
		{"lockgate.lock.acquire.duration", []string{"outcome=acquired"}, 6},
		{"lockgate.lock.acquire.duration", []string{"outcome=reentered"}, 1},
		{"lockgate.lock.acquire.duration", []string{"outcome=busy"}, 1},
		{"lockgate.lock.acquire.duration", []string{"outcome=canceled"}, 1},
		{"lockgate.lock.acquire.duration", []string{"outcome=invalid"}, 1},
		{"lockgate.lock.acquire.duration", []string{"outcome=unavailable"}, 1},
		{"lockgate.lock.releases", []string{"outcome=ok"}, 2},
		{"lockgate.lock.releases", []string{"outcome=failed"}, 1},
		{"lockgate.lock.releases", []string{"outcome=not_held"}, 1},
		{"lockgate.lock.renewals", []string{"outcome=lost"}, 1},
		{"lockgate.lock.lost", []string{"reason=not_held"}, 1},
		{"lockgate.lock.lost", []string{"reason=expired"}, 1},
		{"lockgate.lock.lost", []string{"reason=closed"}, 1},
		{"lockgate.lock.held", nil, 0},
		{"lockgate.lock.waiters", nil, 0},
		{"lockgate.lock.hold.duration", nil, 6},
	} {
		attr := append([]string{"pattern=" + pattern}, c.attr...)
		got, ok := r.value(t, c.name, attr...)
		if !ok || int(got) != c.want {
			t.Errorf("%s %v = %v (present %v), want %d", c.name, attr, got, ok, c.want)
		}
	}
	if n := r.count(t, "lockgate.lock.renewals", "pattern="+pattern, "outcome=failed"); n < 1 {
		t.Errorf("renewals failed = %d, want at least 1 (Redis refused them)", n)
	}
	for _, a := range r.attributes(t) {
		if strings.Contains(a, "user-831204") {
			t.Errorf("an attribute holds the raw key: %s", a)
		}
	}
}

// The clock offset gauge, from the acquire script's server time, is near
// zero against a local Redis.
func TestClockOffsetNearZero(t *testing.T) {
	srv := redistest.Start(t)
	r := newRig(t)
	l := r.locker(t, srv.Client(t))
	ctx := locktest.Context(t)
	if _, ok := r.value(t, "lockgate.redis.clock.offset"); ok {
		t.Fatal("probe: an offset before any acquisition")
	}
	s, err := l.Lock(ctx, "clock")
	if err != nil {
		t.Fatal(err)
	}
	s.Unlock(ctx)
	v, ok := r.value(t, "lockgate.redis.clock.offset")
	if !ok || math.Abs(v) > 0.02 {
		t.Errorf("clock offset = %v s (present %v), want near 0", v, ok)
	}
}
