package core_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// ofKind is the events of kind rec has recorded, in order.
func ofKind(rec *locktest.Events, kind core.EventKind) []core.Event {
	var out []core.Event
	for _, e := range rec.All() {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

type tagKey struct{}

func tagOf(ctx context.Context) string { s, _ := ctx.Value(tagKey{}).(string); return s }

func withTag(ctx context.Context, tag string) context.Context {
	return context.WithValue(ctx, tagKey{}, tag)
}

// A waiter is told who it waits for: the holder's tag comes back with the
// busy answer (EventWaiting, then the acquisition's event, Waited), and a
// lock handed to a waiter by the release carries the waiter's own tag from
// its queue entry. Control: a Locker without a tag function stores and
// hears nothing.
func TestHolderTagReachesTheWaiter(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rec := &locktest.Events{}
	holder, _ := locktest.NewLocker(t, srv, core.WithHolderTag(tagOf))
	waiter, _ := locktest.NewLocker(t, srv, core.WithHolderTag(tagOf), core.WithObserver(rec))
	ctx := locktest.Context(t)
	s, err := holder.Lock(withTag(ctx, "holder-span"), "order:1:2")
	if err != nil {
		t.Fatal(err)
	}
	info, err := holder.Inspect(ctx, "order:1:2")
	if err != nil || info.HolderTag != "holder-span" {
		t.Fatalf("Inspect = %+v, %v; want the holder's tag stored", info, err)
	}
	got := make(chan error, 1)
	go func() {
		w, err := waiter.Lock(withTag(ctx, "waiter-span"), "order:1:2", core.WithWait(10*time.Second))
		if err == nil {
			defer w.Unlock(ctx)
			info, err = waiter.Inspect(ctx, "order:1:2")
			if err == nil && info.HolderTag != "waiter-span" {
				err = errors.New("the granted hold carries tag " + info.HolderTag)
			}
		}
		got <- err
	}()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	w, ok := rec.Wait(wctx, func(e core.Event) bool { return e.Kind == core.EventWaiting })
	if !ok {
		t.Fatal("the waiter's EventWaiting did not come within 5s")
	}
	if w.HolderTag != "holder-span" {
		t.Errorf("EventWaiting.HolderTag = %q, want the holder's", w.HolderTag)
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	acq := ofKind(rec, core.EventAcquired)
	if len(acq) != 1 || !acq[0].Waited || acq[0].HolderTag != "holder-span" {
		t.Errorf("the waiter's EventAcquired = %+v, want Waited and the holder's tag", acq)
	}

	// Control: no tag function, nothing stored, nothing heard.
	plain := &locktest.Events{}
	p1, _ := locktest.NewLocker(t, srv)
	p2, _ := locktest.NewLocker(t, srv, core.WithObserver(plain))
	s, err = p1.Lock(withTag(ctx, "holder-span"), "order:3:4")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.TryLock(withTag(ctx, "x"), "order:3:4"); !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	if info, _ := p1.Inspect(ctx, "order:3:4"); info.HolderTag != "" || !info.Held {
		t.Errorf("without a tag function Inspect = %+v, want held and no tag", info)
	}
	if e := ofKind(plain, core.EventNotObtained); len(e) != 1 || e[0].HolderTag != "" || e[0].Waited {
		t.Errorf("without a tag function the busy event is %+v", e)
	}
	s.Unlock(ctx)

	// A tag too long or holding the separator is not stored.
	for _, bad := range []string{strings.Repeat("a", core.MaxHolderTagLen+1), "a|b"} {
		s, err := holder.Lock(withTag(ctx, bad), "order:5:6")
		if err != nil {
			t.Fatal(err)
		}
		if info, _ := holder.Inspect(ctx, "order:5:6"); info.HolderTag != "" {
			t.Errorf("tag %.10q... was stored", bad)
		}
		s.Unlock(ctx)
	}
}

// The clock offset is estimated from the fence (the server's clock when the
// acquire ran) and the round trip's midpoint: near zero on loopback, and,
// with every reply delayed 200ms, within half the round trip, the error
// bound it documents (probe: the estimate moves by about that much, so it
// reads the reply's timing and is not a constant).
func TestClockOffsetEstimate(t *testing.T) {
	// Alone, not side by side: it bounds a time tightly (see TestMain).
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr)
	rec := &locktest.Events{}
	c := noRetries(t, proxy.Addr)
	l := locktest.Locker(t, c, core.WithObserver(rec))
	ctx := locktest.Context(t)
	// Idle connections for every caller below, the Locker's monitor
	// included (it reads the node's run id every second): a sample whose
	// call must dial first counts the handshake's round trips too.
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); c.Ping(ctx) }()
	}
	wg.Wait()
	s, err := l.Lock(ctx, "clock:1")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := l.Lock(s.Context(), "clock:1")
	if err != nil {
		t.Fatal(err)
	}
	inner.Unlock(ctx)
	s.Unlock(ctx)
	acq := ofKind(rec, core.EventAcquired)
	if len(acq) != 2 || !acq[0].ClockSampled || acq[1].ClockSampled {
		t.Fatalf("events %+v: want a sample from the fresh acquisition only", acq)
	}
	if off := acq[0].ClockOffset; off.Abs() > 20*time.Millisecond {
		t.Errorf("offset against a local Redis = %v, want near zero", off)
	}
	proxy.SetLatency(200 * time.Millisecond)
	s, err = l.Lock(ctx, "clock:2", core.WithWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetLatency(0)
	s.Unlock(ctx)
	e := ofKind(rec, core.EventAcquired)[2]
	if !e.ClockSampled || e.Wait < 200*time.Millisecond {
		t.Fatalf("probe: the delayed acquisition %+v", e)
	}
	if e.ClockOffset > 0 || e.ClockOffset < -e.Wait/2-10*time.Millisecond || e.ClockOffset > -50*time.Millisecond {
		t.Errorf("offset with replies delayed 200ms = %v (round trip %v): want about -100ms, within half the round trip", e.ClockOffset, e.Wait)
	}
}

// Each hold ends in exactly one event: a release (the first; a retried
// Unlock is Retry), or a loss — also when Close ends it (EventLost,
// ErrClosed), so a count of held locks built on events returns to zero.
func TestEveryHoldEndsOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr)
	rec := &locktest.Events{}
	l, err := core.New(noRetries(t, proxy.Addr), core.WithObserver(rec), core.WithReleaseTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := locktest.Context(t)
	a, err := l.Lock(ctx, "end:1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Lock(ctx, "end:2")
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetRefuse(true)
	proxy.Cut()
	if err := a.Unlock(ctx); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Unlock with Redis unreachable = %v, want ErrUnavailable", err)
	}
	proxy.SetRefuse(false)
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("retried Unlock = %v", err)
	}
	l.Close()
	within(t, b.Done(), time.Second, "Close ending the lease")
	rel := ofKind(rec, core.EventReleased)
	if len(rel) != 2 || rel[0].Retry || rel[0].Err == nil || !rel[1].Retry || rel[1].Err != nil {
		t.Errorf("releases %+v: want a failed one, then its retry", rel)
	}
	lost := ofKind(rec, core.EventLost)
	if len(lost) != 1 || !errors.Is(lost[0].Err, core.ErrClosed) || lost[0].Fence != b.Fence() {
		t.Errorf("lost %+v: want the lease Close ended, ErrClosed", lost)
	}
}

// Lost locks and failed releases are logged with the pattern and the
// fence, never the key (user data) or the owner id.
func TestLogsNameThePatternNotTheKey(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr)
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	rec := &locktest.Events{}
	l := locktest.Locker(t, noRetries(t, proxy.Addr), core.WithLogger(log), core.WithObserver(rec))
	ctx := locktest.Context(t)
	s, err := l.Lock(ctx, "order:secret-user-42:7", core.WithPattern("order:{user}:{voucher}"), core.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Lost: someone deletes it; the next renewal finds it gone.
	if err := srv.Client(t).Del(ctx, "lockgate:{order:secret-user-42:7}").Err(); err != nil {
		t.Fatal(err)
	}
	within(t, s.Done(), 5*time.Second, "the loss")
	r, err := l.Lock(ctx, "order:secret-user-42:8", core.WithPattern("order:{user}:{voucher}"))
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetRefuse(true)
	proxy.Cut()
	if err := r.Unlock(ctx); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Unlock with Redis unreachable = %v", err)
	}
	proxy.SetRefuse(false)
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"lock lost", "release failed", "pattern=order:{user}:{voucher}", "fence=" + itoa(s.Fence()), "fence=" + itoa(r.Fence())} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret-user") {
		t.Errorf("the log holds the key:\n%s", out)
	}
	if lost := ofKind(rec, core.EventLost); len(lost) != 1 || !errors.Is(lost[0].Err, core.ErrNotHeld) {
		t.Errorf("probe: lost events %+v", lost)
	}
}

// noRetries is a client to addr that does not re-send failed commands, so
// that a failure is reported once and nothing goes on in the background.
func noRetries(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// The tag function is asked once per call that goes to Redis, never by a
// re-entry, which sends nothing (it runs on every Lock's hot path).
func TestReentryAsksNoTag(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var asked atomic.Int32
	l, _ := locktest.NewLocker(t, srv, core.WithHolderTag(func(ctx context.Context) string { asked.Add(1); return "t" }))
	ctx := locktest.Context(t)
	s, err := l.Lock(ctx, "tag:1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unlock(ctx)
	inner, err := l.Lock(s.Context(), "tag:1")
	if err != nil || !inner.Reentrant() {
		t.Fatalf("re-entry = %v, %v", inner, err)
	}
	inner.Unlock(ctx)
	if n := asked.Load(); n != 1 {
		t.Errorf("the tag function was asked %d times, want 1 (the fresh acquisition only)", n)
	}
}

// A waiter at the head of the queue that takes the lock itself, the holder
// gone and others queued behind it, stores its own tag with the hold, as a
// waiter handed the lock by a release does (the hold is in the full form,
// since others wait). The holder's lease runs out unrenewed; the waiter
// behind is an entry put in the queue directly, so that only the head
// waiter's own attempt can take the lock; it is planted before the waiter
// queues, its join time after every real one's. The holder's lease (1.5s)
// leaves the waiter time to queue on a loaded machine. On one server and
// on a 3-master Cluster. Control: queued-take-untagged (the head
// waiter's take writes no tag): Inspect reads no tag.
func TestHeadWaiterTakingTheLockStoresItsTag(t *testing.T) {
	fixedAndControl(t, "queued-take-untagged", func(t *testing.T, control bool, opts []core.Option) {
		onSingleAndCluster(t, func(t *testing.T, c redis.UniversalClient) {
			holder := locktest.Locker(t, c, core.WithHolderTag(tagOf))
			waiter := locktest.Locker(t, c, append(opts, core.WithHolderTag(tagOf))...)
			ctx := locktest.Context(t)
			const key = "tag:head"
			resume := core.PauseWatchdog(holder)
			defer resume()
			if _, err := holder.Lock(withTag(ctx, "holder-span"), key, core.WithTTL(1500*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			// The entry behind: its score (1e18) is after every real join time.
			q, qt := locktest.RedisKey(key)+":q", locktest.RedisKey(key)+":qt"
			if err := c.ZAdd(ctx, q, redis.Z{Score: 1e18, Member: "planted:behind"}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.HSet(ctx, qt, "planted:behind", fmt.Sprintf("%d|1", time.Now().Add(time.Minute).UnixMilli())).Err(); err != nil {
				t.Fatal(err)
			}
			got := make(chan core.LockInfo, 1)
			fence := make(chan int64, 1)
			errs := make(chan error, 1)
			go func() {
				w, err := waiter.Lock(withTag(ctx, "head-span"), key, core.WithWait(5*time.Second))
				if err != nil {
					errs <- err
					return
				}
				defer w.Unlock(ctx)
				info, err := waiter.Inspect(ctx, key)
				if err != nil {
					errs <- err
					return
				}
				fence <- w.Fence()
				got <- info
			}()
			select {
			case err := <-errs:
				t.Fatal(err)
			case info := <-got:
				f := <-fence
				if info.Waiters < 1 {
					t.Fatalf("probe: the planted entry is not queued behind the head waiter (%+v): the scenario did not happen", info)
				}
				if control {
					if info.HolderTag == "head-span" {
						t.Fatalf("control: Inspect read the head waiter's tag though its take writes none: %+v", info)
					}
					return
				}
				if info.HolderTag != "head-span" || info.Fence != f {
					t.Fatalf("Inspect of the head waiter's hold = %+v, want fence %d and tag head-span", info, f)
				}
			}
		})
	})
}
