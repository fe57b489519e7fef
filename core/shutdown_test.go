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

// A Lock whose acquire is in flight when Close runs (the reply held by the
// proxy, so the race is certain, not luck) returns ErrClosed and leaves
// nothing held: the grant that arrives after Close is undone (before, it
// returned a lease that no watchdog renewed and no Close ended).
func TestLockRacingClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p, c := lateClient(t, srv, 5*time.Second)
	l, err := core.New(c)
	if err != nil {
		t.Fatal(err)
	}
	_, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	locktest.Warm(t, l)

	h := p.HoldReply(script(t, "acquire", "k"), 300*time.Millisecond)
	type res struct {
		s   *core.Lease
		err error
	}
	got := make(chan res, 1)
	go func() {
		s, err := l.Lock(ctx, "k")
		got <- res{s, err}
	}()
	within(t, h.Matched(), 2*time.Second, "the acquire in flight")
	if n := direct.Exists(ctx, "lockgate:{k}").Val(); n != 1 {
		t.Fatal("probe: the acquire in flight holds nothing in Redis yet")
	}
	l.Close()
	r := <-got
	if r.s != nil {
		select {
		case <-r.s.Done():
		default:
			t.Fatal("Lock racing Close returned a lease that Close did not end")
		}
	} else if !errors.Is(r.err, core.ErrClosed) {
		t.Fatalf("Lock racing Close = %v, want ErrClosed", r.err)
	}
	waitGone(t, direct, "lockgate:{k}")
}

// Shutdown cancels held leases' contexts with ErrClosed, releases them in
// Redis and fails waiting and later Locks with ErrClosed. Control: Close
// leaves the lock in Redis until its TTL.
func TestShutdownReleases(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := locktest.Context(t)
	_, direct := locktest.NewLocker(t, srv)
	holder, _ := locktest.NewLocker(t, srv)

	l := core.Must(core.New(srv.Client(t)))
	a, err := l.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Lock(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	busy, err := holder.Lock(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Unlock(ctx)
	waiting := make(chan error, 1)
	go func() {
		_, err := l.Lock(ctx, "busy", core.WithWait(time.Minute))
		waiting <- err
	}()
	waitSubscribers(t, direct, "lockgate:{busy}", 1)

	if err := l.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*core.Lease{a, b} {
		within(t, s.Done(), time.Second, "held lease ended by Shutdown")
		if !errors.Is(context.Cause(s.Context()), core.ErrClosed) {
			t.Fatalf("cause %v, want ErrClosed", context.Cause(s.Context()))
		}
		if n := direct.Exists(ctx, "lockgate:{"+s.Key()+"}").Val(); n != 0 {
			t.Fatalf("%s still held in Redis after Shutdown", s.Key())
		}
	}
	if err := <-waiting; !errors.Is(err, core.ErrClosed) {
		t.Fatalf("waiting Lock at Shutdown = %v, want ErrClosed", err)
	}
	if _, err := l.Lock(ctx, "c"); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Lock after Shutdown = %v", err)
	}
	if err := a.Unlock(ctx); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Unlock after Shutdown = %v, want ErrClosed", err)
	}

	t.Run("control: Close keeps the lock", func(t *testing.T) {
		l := core.Must(core.New(srv.Client(t)))
		s, err := l.Lock(ctx, "kept")
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		within(t, s.Done(), time.Second, "held lease ended by Close")
		if n := direct.Exists(ctx, "lockgate:{kept}").Val(); n != 1 {
			t.Fatal("Close released the lock")
		}
	})
}

// Close is safe twice, leaves the client usable, ends held leases with
// ErrClosed, and makes later calls fail with ErrClosed.
func TestClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	l := core.Must(core.New(c))
	ctx := locktest.Context(t)
	s, err := l.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	within(t, s.Done(), time.Second, "held lease ended by Close")
	if !errors.Is(context.Cause(s.Context()), core.ErrClosed) {
		t.Fatalf("cause %v, want ErrClosed", context.Cause(s.Context()))
	}
	if _, err := l.Lock(ctx, "other"); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Lock after Close = %v", err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("client closed by Locker.Close: %v", err)
	}
}
