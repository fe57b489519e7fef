package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// Extend renews by hand: a fixed 200ms lease extended to 5s outlives its
// first TTL, its validity moves, and Extend of a lost lease is ErrNotHeld.
func TestExtendByHand(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var mu sync.Mutex
	var extended []error
	obs := core.ObserverFunc(func(_ context.Context, e core.Event) {
		if e.Kind == core.EventExtended {
			mu.Lock()
			extended = append(extended, e.Err)
			mu.Unlock()
		}
	})
	a, _ := locktest.NewLocker(t, srv, core.WithObserver(obs))
	b, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	s, err := a.Lock(ctx, "k", core.WithTTL(200*time.Millisecond), core.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	before := s.Valid()
	if err := s.Extend(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	after := s.Valid()
	if !after.After(before.Add(time.Second)) {
		t.Fatalf("validity %v after Extend, was %v: want it moved by seconds", after, before)
	}
	if d, err := s.TTL(ctx); err != nil || d <= 200*time.Millisecond {
		t.Fatalf("TTL after Extend = %v, %v", d, err)
	}
	// Past the original 200ms, another owner still cannot have it.
	if _, err := b.Lock(ctx, "k", core.WithWait(400*time.Millisecond)); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("other owner after the first TTL: %v", err)
	}
	if err := s.Extend(ctx, time.Millisecond); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("Extend below MinTTL = %v", err)
	}
	srv.Client(t).Del(ctx, "lockgate:{k}")
	if err := s.Extend(ctx, time.Second); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Extend of a deleted lock = %v", err)
	}
	within(t, s.Done(), time.Second, "lease ended after a failed Extend")
	if !errors.Is(context.Cause(s.Context()), core.ErrLockLost) {
		t.Fatalf("cause %v", context.Cause(s.Context()))
	}
	// The Observer is told of each Extend that reached Redis, with its
	// outcome (the one below MinTTL is refused before).
	mu.Lock()
	defer mu.Unlock()
	if len(extended) != 2 || extended[0] != nil || !errors.Is(extended[1], core.ErrNotHeld) {
		t.Fatalf("observed Extend outcomes %v, want [nil, ErrNotHeld]", extended)
	}
}

// A Redis stall shorter than the lease's validity is ridden out: the
// renewals that hang or fail are retried and the lease is not lost.
func TestTransientStallDoesNotLoseLease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, c := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	s, err := a.Lock(ctx, "k", core.WithTTL(3*time.Second)) // renewed every 1s, valid ~2.97s
	if err != nil {
		t.Fatal(err)
	}
	first := s.Valid()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the fault: a stall across a renewal, shorter than the validity
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	// Wait (bounded) until a renewal has gone through after the stall: the
	// validity moves past where the acquisition put it.
	for i := 0; ; i++ {
		if s.Valid().After(first) {
			break
		}
		if i == 150 {
			t.Fatal("no renewal went through within 3s after the stall")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-s.Done():
		t.Fatalf("lease lost over a short stall: %v", context.Cause(s.Context()))
	default:
	}
	if ttl := c.PTTL(ctx, "lockgate:{k}").Val(); ttl <= 0 {
		t.Fatalf("lock key TTL %v after the stall", ttl)
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Extend and TTL on a hung Redis return within the context's deadline
// whatever the client's timeouts (the rig found an Extend that took 858ms
// with a 500ms deadline).
func TestExtendAndTTLWithinDeadline(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := defaultsClient(t, srv)
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	s, err := l.Lock(ctx, "k", core.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	resume := pause(t, srv)
	for name, call := range map[string]func(context.Context) error{
		"Extend": func(ctx context.Context) error { return s.Extend(ctx, 5*time.Second) },
		"TTL":    func(ctx context.Context) error { _, err := s.TTL(ctx); return err },
	} {
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		err := call(dctx)
		took := time.Since(start)
		cancel()
		t.Logf("%s on a SIGSTOPped Redis with a 200ms deadline: %v after %v", name, err, took)
		if !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("%s = %v, want ErrUnavailable", name, err)
		}
		if took > 200*time.Millisecond+budgetSlack {
			t.Fatalf("%s took %v with a 200ms deadline", name, took)
		}
	}
	resume()
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// The lease's context keeps its parent's deadline: a timeout derived from
// it fires at its own time, and a lease without a parent deadline has none
// (before: the validity, ~TTL, so a 1s call under a 300ms TTL was cut at
// ~390ms although the lease was held and renewed). Valid reports the
// validity, which renewals move.
func TestLeaseContextKeepsParentDeadline(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	s, err := l.Lock(context.Background(), "k", core.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unlock(ctx)
	if d, ok := s.Context().Deadline(); ok {
		t.Fatalf("lease context without a parent deadline reports %v", d)
	}
	if v := time.Until(s.Valid()); v <= 0 || v > 300*time.Millisecond {
		t.Fatalf("validity %v from now, want under the 300ms TTL", v)
	}
	wctx, cancel := context.WithTimeout(s.Context(), time.Second)
	defer cancel()
	start := time.Now()
	<-wctx.Done()
	took := time.Since(start)
	if took < 900*time.Millisecond {
		t.Fatalf("a 1s timeout under the lease fired after %v (%v)", took, context.Cause(wctx))
	}
	if !errors.Is(wctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("the timeout ended with %v", wctx.Err())
	}
	select {
	case <-s.Done():
		t.Fatalf("lease ended over 1s of renewals: %v", context.Cause(s.Context()))
	default:
	}

	pctx, pcancel := context.WithTimeout(ctx, time.Hour)
	defer pcancel()
	s2, err := l.Lock(pctx, "k2", core.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Unlock(ctx)
	want, _ := pctx.Deadline()
	if got, ok := s2.Context().Deadline(); !ok || !got.Equal(want) {
		t.Fatalf("lease deadline %v, want the parent's %v", got, want)
	}
}

// WithWatchdog on one call undoes a Locker-wide WithoutWatchdog: that
// lease is renewed past its TTL while a lease of the same Locker taken
// without it (the control: the Locker-wide default applies) is not renewed
// and ends with ErrLockLost. On one server and on a 3-master Cluster.
func TestWithWatchdogUndoesLockerWide(t *testing.T) {
	t.Parallel()
	for _, topo := range []string{"single", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			var c redis.UniversalClient
			if topo == "single" {
				c = redistest.Start(t).Client(t)
			} else {
				c = redistest.StartCluster(t, 3).Client(t)
			}
			withWatchdogUndoesLockerWide(t, c)
		})
	}
}

func withWatchdogUndoesLockerWide(t *testing.T, c redis.UniversalClient) {
	events := &locktest.Events{}
	l := locktest.Locker(t, c, core.WithoutWatchdog(), core.WithObserver(events))
	ctx := locktest.Context(t)
	const ttl = 600 * time.Millisecond
	renewed, err := l.Lock(ctx, "renewed", core.WithTTL(ttl), core.WithWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := l.Lock(ctx, "fixed", core.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	within(t, fixed.Done(), 10*ttl, "the fixed lease ended")
	if !errors.Is(context.Cause(fixed.Context()), core.ErrLockLost) {
		t.Fatalf("the fixed lease's cause = %v, want ErrLockLost", context.Cause(fixed.Context()))
	}
	// Taken first with the same TTL, the other lease outlived it: renewed.
	if err := renewed.Context().Err(); err != nil {
		t.Fatalf("the WithWatchdog lease ended with the fixed one: %v", context.Cause(renewed.Context()))
	}
	var renewals int
	for _, e := range events.All() {
		switch {
		case e.Kind != core.EventRenewed:
		case e.Key == "fixed":
			t.Fatal("the lease under the Locker-wide WithoutWatchdog was renewed")
		case e.Err == nil:
			renewals++
		}
	}
	if renewals == 0 {
		t.Fatal("the WithWatchdog lease is live past its TTL, yet no renewal was reported")
	}
	if err := renewed.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the renewed lease after the fixed one expired: %v", err)
	}
}
