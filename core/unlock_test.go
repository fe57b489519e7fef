package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// Unlock with the context of a request that is already over still
// releases (before: "redis unavailable: release: context canceled", and the
// lock held for its TTL).
func TestUnlockWithEndedContext(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, direct := locktest.NewLocker(t, srv)
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
	t.Parallel()
	for _, ctxTimeout := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeout), func(t *testing.T) { testUnlockRetryAfterFailure(t, ctxTimeout) })
	}
}

func testUnlockRetryAfterFailure(t *testing.T, ctxTimeout bool) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: ctxTimeout})
	t.Cleanup(func() { c.Close() })
	l := locktest.Locker(t, c)
	_, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
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
	// Alone, not side by side: it bounds a time tightly (see TestMain).
	srv := redistest.Start(t)
	c := defaultsClient(t, srv)
	hook := &countingHook{}
	c.AddHook(hook)
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
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
