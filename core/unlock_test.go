package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// Unlock with the context of a request that is already over still
// releases (before: "redis unavailable: release: context canceled", and the
// lock held for its TTL).
func TestUnlockWithEndedContext(t *testing.T) {
	srv := redistest.Start(t)
	l, direct := newLocker(t, srv)
	req, cancel := context.WithCancel(context.Background())
	s, err := l.Lock(req, "k")
	if err != nil {
		t.Fatal(err)
	}
	cancel() // the request is over
	if err := s.Unlock(req); err != nil {
		t.Fatalf("Unlock with an ended context = %v", err)
	}
	if n := direct.Exists(context.Background(), "lockgate:{k}").Val(); n != 0 {
		t.Fatal("the lock is still in Redis")
	}
}

// A release that Redis does not answer returns ErrUnavailable within the
// release timeout (whatever the client's timeouts) and is retried by
// calling Unlock again; the retry finds it released.
func TestUnlockRetryAfterFailure(t *testing.T) {
	for _, ctxTimeout := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeout), func(t *testing.T) { testUnlockRetryAfterFailure(t, ctxTimeout) })
	}
}

func testUnlockRetryAfterFailure(t *testing.T, ctxTimeout bool) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: ctxTimeout})
	t.Cleanup(func() { c.Close() })
	l := lockerOn(t, c)
	_, direct := newLocker(t, srv)
	ctx := ctxT(t)
	s, err := l.Lock(ctx, "k", core.WithReleaseTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	resume := pause(t, srv)
	start := time.Now()
	err = s.Unlock(ctx)
	took := time.Since(start)
	t.Logf("Unlock on a SIGSTOPped Redis with a 200ms release timeout: %v after %v", err, took)
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Unlock on a hung Redis = %v, want ErrUnavailable", err)
	}
	if took > 200*time.Millisecond+budgetSlack {
		t.Fatalf("Unlock took %v with a 200ms release timeout", took)
	}
	resume()
	var retryErr error
	for i := 0; i < 20; i++ { // bounded: the server answers again within a few tries
		if retryErr = s.Unlock(ctx); retryErr == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if retryErr != nil {
		t.Fatalf("Unlock again after the server resumed = %v", retryErr)
	}
	if n := direct.Exists(ctx, "lockgate:{k}").Val(); n != 0 {
		t.Fatal("the lock is still in Redis after the retried Unlock")
	}
	if err := s.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock after a successful one = %v, want ErrNotHeld", err)
	}
}

// A lease already known lost is not released again: Unlock answers at once
// without a round trip (before: a hung Redis added the release timeout to
// every response after the handler).
func TestUnlockOfLostLeaseIsImmediate(t *testing.T) {
	srv := redistest.Start(t)
	c := defaultsClient(t, srv)
	hook := &countingHook{}
	c.AddHook(hook)
	l := lockerOn(t, c)
	ctx := ctxT(t)
	s, err := l.Lock(ctx, "k", core.WithTTL(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	pause(t, srv)
	within(t, s.Done(), 2*time.Second, "lease lost while Redis is hung")
	if !errors.Is(context.Cause(s.Context()), core.ErrLockLost) {
		t.Fatalf("cause %v", context.Cause(s.Context()))
	}
	sent := hook.n.Load()
	start := time.Now()
	err = s.Unlock(ctx)
	if took := time.Since(start); took > 50*time.Millisecond {
		t.Fatalf("Unlock of a lost lease took %v", took)
	}
	if !errors.Is(err, core.ErrNotHeld) || !errors.Is(err, core.ErrLockLost) {
		t.Fatalf("Unlock of a lost lease = %v, want ErrNotHeld and ErrLockLost", err)
	}
	if n := hook.n.Load() - sent; n != 0 {
		t.Fatalf("Unlock of a lost lease sent %d commands", n)
	}
}

// The lease's context keeps its parent's deadline: a timeout derived from
// it fires at its own time, and a lease without a parent deadline has none
// (before: the validity, ~TTL, so a 1s call under a 300ms TTL was cut at
// ~390ms although the lease was held and renewed). Valid reports the
// validity, which renewals move.
func TestLeaseContextKeepsParentDeadline(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := newLocker(t, srv)
	ctx := ctxT(t)
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
