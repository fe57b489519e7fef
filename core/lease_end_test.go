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

// An Extend whose renewal Redis ran, but whose answer came after the lease
// was declared lost (its validity ran out meanwhile), reports the loss and
// gives the lock back: before, it returned nil and left the lock extended
// in Redis, held by nobody, for the whole new TTL. Control: the mutant
// keep-late-renewal keeps that renewal (Extend says nil, the other owner
// stays out).
func TestExtendAnsweredAfterLossGivesTheLockBack(t *testing.T) {
	t.Parallel()
	fixedAndControl(t, "keep-late-renewal", func(t *testing.T, control bool, opts []core.Option) {
		srv := redistest.Start(t)
		p, c := lateClient(t, srv, 5*time.Second)
		opts = append(opts, core.WithAttemptTimeout(4*time.Second))
		l := locktest.Locker(t, c, opts...)
		other, _ := locktest.NewLocker(t, srv)
		ctx := locktest.Context(t)
		const ttl = 500 * time.Millisecond
		s, err := l.Lock(ctx, "late-extend", core.WithTTL(ttl), core.WithoutWatchdog())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Extend(ctx, ttl); err != nil { // the server caches the renew script
			t.Fatal(err)
		}
		// The renewal runs at once; its answer comes well after the
		// lease's validity (under its TTL) ends.
		hr := p.HoldReply(script(t, "renew", "late-extend"), 3*ttl)
		err = s.Extend(ctx, 10*time.Minute)
		select {
		case <-s.Done():
		default:
			t.Fatalf("the lease was not lost while the renewal's answer was held (%v)", err)
		}
		select {
		case <-hr.Answered():
		default:
			t.Fatal("the renewal did not run in Redis")
		}
		got, lerr := other.Lock(ctx, "late-extend", core.WithWait(2*time.Second))
		if lerr == nil {
			got.Unlock(ctx)
		}
		if control {
			if err != nil || lerr == nil {
				t.Fatalf("control: Extend = %v (want nil), another owner's Lock = %v (want busy: the lock extended by 10m)", err, lerr)
			}
			return
		}
		if !errors.Is(err, core.ErrLockLost) || !errors.Is(err, core.ErrNotHeld) {
			t.Errorf("Extend answered after the loss = %v, want ErrNotHeld and ErrLockLost", err)
		}
		if lerr != nil {
			t.Errorf("another owner's Lock after the late Extend = %v, want the lock given back", lerr)
		}
		if v := s.Valid(); !v.IsZero() {
			t.Errorf("Valid of the lost lease = %v ahead, want zero", time.Until(v))
		}
	})
}

// An Extend that Redis ran but did not answer within its budget
// (ErrUnavailable) may have extended the lock: once the lease is lost, at
// its validity's end, the lock is given back, though a shorter renewal
// was answered since (the longer one may still stand in Redis). Control:
// keep-late-renewal leaves it extended (10m) though nobody holds it.
func TestExtendUnansweredThenLostGivesTheLockBack(t *testing.T) {
	t.Parallel()
	fixedAndControl(t, "keep-late-renewal", func(t *testing.T, control bool, opts []core.Option) {
		srv := redistest.Start(t)
		p, c := lateClient(t, srv, 5*time.Second)
		l := locktest.Locker(t, c, opts...)
		other, _ := locktest.NewLocker(t, srv)
		ctx := locktest.Context(t)
		const ttl = 700 * time.Millisecond
		s, err := l.Lock(ctx, "unanswered-extend", core.WithTTL(ttl), core.WithoutWatchdog())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Extend(ctx, ttl); err != nil { // the server caches the renew script
			t.Fatal(err)
		}
		// The renewal runs at once; its answer comes after Extend's
		// budget (the 500ms attempt timeout) and after the lease's validity.
		p.HoldReply(script(t, "renew", "unanswered-extend"), 3*ttl)
		if err := s.Extend(ctx, 10*time.Minute); !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("Extend with its answer held = %v, want ErrUnavailable", err)
		}
		if err := s.Extend(ctx, ttl); err != nil && !errors.Is(err, core.ErrNotHeld) {
			t.Fatalf("a shorter Extend after it = %v", err)
		}
		within(t, s.Done(), 3*ttl, "the lease's loss at its validity's end")
		got, err := other.Lock(ctx, "unanswered-extend", core.WithWait(2*time.Second))
		if err == nil {
			got.Unlock(ctx)
		}
		switch {
		case control && err == nil:
			t.Fatal("control: the lock was given back")
		case !control && err != nil:
			t.Fatalf("another owner's Lock after the lost lease's unanswered Extend = %v, want the lock given back", err)
		}
	})
}

// A renewal by the watchdog answered after the lease was declared lost is
// given back too: the release reaches Redis once the answer arrives.
// Control: keep-late-renewal sends none.
func TestWatchdogRenewalAnsweredAfterLossGivesTheLockBack(t *testing.T) {
	t.Parallel()
	fixedAndControl(t, "keep-late-renewal", func(t *testing.T, control bool, opts []core.Option) {
		srv := redistest.Start(t)
		p, c := lateClient(t, srv, 5*time.Second)
		l := locktest.Locker(t, c, opts...)
		ctx := locktest.Context(t)
		const ttl = 600 * time.Millisecond
		warm, err := l.Lock(ctx, "late-renew:warm")
		if err != nil {
			t.Fatal(err)
		}
		if err := warm.Extend(ctx, time.Minute); err != nil { // the server caches the renew script
			t.Fatal(err)
		}
		hr := p.HoldReply(script(t, "renew", "late-renew"), 2*ttl)
		s, err := l.Lock(ctx, "late-renew", core.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		release := p.HoldReply(script(t, "release", "late-renew"), 0) // a signal when one is sent
		within(t, s.Done(), 3*ttl, "the lease's loss while its renewal's answer is held")
		within(t, hr.Released(), 3*ttl, "the held renewal's answer")
		if control {
			select {
			case <-release.Matched():
				t.Fatal("control: the late renewal was given back")
			case <-time.After(500 * time.Millisecond):
			}
			return
		}
		within(t, release.Matched(), 2*time.Second, "a release after the renewal answered held for a lost lease")
	})
}

// A re-entry lives as long as the first lease's context: one made under
// context.WithoutCancel(outer.Context()) is still cancelled when the hold
// is lost or its Locker closes, and a re-entry never unlocked stops being
// renewed once the outer lease is unlocked (it expires within one TTL).
// A re-entry's Unlock after the loss reports it. Control: first-ctx-only.
func TestReentryEndsWithTheFirstLease(t *testing.T) {
	t.Parallel()
	fixedAndControl(t, "first-ctx-only", func(t *testing.T, control bool, opts []core.Option) {
		srv := redistest.Start(t)
		l, direct := locktest.NewLocker(t, srv, opts...)
		other, _ := locktest.NewLocker(t, srv)
		ctx := locktest.Context(t)
		const ttl = 400 * time.Millisecond

		// Lost: the key removed behind the holder's back.
		outer, err := l.Lock(ctx, "re:lost", core.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		inner, err := l.Lock(context.WithoutCancel(outer.Context()), "re:lost")
		if err != nil || !inner.Reentrant() {
			t.Fatalf("re-entry: %v", err)
		}
		// The channel is taken before the loss: a goroutine already waiting
		// on it learns of the loss only if the re-entry follows the hold.
		innerDone := inner.Done()
		direct.Del(ctx, locktest.RedisKey("re:lost"))
		within(t, outer.Done(), 3*ttl, "the outer lease's loss")
		followed(t, control, innerDone, "the loss")
		if err := inner.Unlock(ctx); !control && !errors.Is(err, core.ErrLockLost) {
			t.Errorf("the re-entry's Unlock after the loss = %v, want ErrLockLost", err)
		}

		// Closed: the Locker closes while both leases are held.
		closing := locktest.Locker(t, srv.Client(t), opts...)
		outer, err = closing.Lock(ctx, "re:closed", core.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		inner, err = closing.Lock(context.WithoutCancel(outer.Context()), "re:closed")
		if err != nil || !inner.Reentrant() {
			t.Fatalf("re-entry: %v", err)
		}
		innerDone = inner.Done()
		closing.Close()
		followed(t, control, innerDone, "Close")

		// Forgotten: the outer lease unlocked, the re-entry never.
		outer, err = l.Lock(ctx, "re:forgot", core.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Lock(outer.Context(), "re:forgot"); err != nil {
			t.Fatal(err)
		}
		if err := outer.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := other.Lock(ctx, "re:forgot", core.WithWait(4*ttl))
		if control {
			if err == nil {
				got.Unlock(ctx)
				t.Fatal("control: the forgotten re-entry's lock expired")
			}
			return
		}
		if err != nil {
			t.Fatalf("another owner, within %v of the outer Unlock: %v (the forgotten re-entry is still renewed)", 4*ttl, err)
		}
		got.Unlock(ctx)
	})
}

// followed checks that a re-entry's Done channel closed with its hold's end
// (what), or, in the control, that it did not within 200ms.
func followed(t *testing.T, control bool, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
		if control {
			t.Fatalf("control: the re-entry's context ended with %s", what)
		}
	case <-time.After(200 * time.Millisecond):
		if !control {
			t.Fatalf("the re-entry's context lives on after %s", what)
		}
	}
}

// Once a lease ends, what it answers says so: Valid is zero after Unlock,
// and Extend and TTL after Close return ErrClosed, not ErrNotHeld.
func TestLeaseAfterItsEnd(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	s, err := l.Lock(ctx, "ended:1")
	if err != nil {
		t.Fatal(err)
	}
	if time.Until(s.Valid()) <= 0 {
		t.Fatalf("Valid of a held lease = %v", s.Valid())
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if v := s.Valid(); !v.IsZero() {
		t.Errorf("Valid after Unlock = %v ahead, want zero", time.Until(v))
	}
	s, err = l.Lock(ctx, "ended:2")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := s.Extend(ctx, time.Second); !errors.Is(err, core.ErrClosed) {
		t.Errorf("Extend after Close = %v, want ErrClosed", err)
	}
	if _, err := s.TTL(ctx); !errors.Is(err, core.ErrClosed) {
		t.Errorf("TTL after Close = %v, want ErrClosed", err)
	}
	if v := s.Valid(); !v.IsZero() {
		t.Errorf("Valid after Close = %v ahead, want zero", time.Until(v))
	}
}
