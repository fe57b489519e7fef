package core_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// allCommands reads INFO commandstats: calls per command name, the calls
// scripts make included.
func allCommands(t testing.TB, c *redis.Client) map[string]int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(line, ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		m[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseInt(calls, 10, 64)
	}
	return m
}

// diffCommands is b - a without the INFO calls that read them.
func diffCommands(a, b map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for name, n := range b {
		if name != "info" && n != a[name] {
			d[name] = n - a[name]
		}
	}
	return d
}

// An uncontended Lock and Unlock costs one script with five commands inside
// (acquire: one EXISTS for the lock, the done marker and the queue, TIME,
// SET GET of the fence, HSET, PEXPIRE) and one HDEL (the release of a lean
// hold: the hash's one field, named by its owner), never touches a queue,
// and leaves nothing behind but its slot's fence floor: no done marker,
// since every call was answered (the client never re-sends them, so no copy
// can still arrive). Controls: with a waiter, the holder's HDEL finds
// nothing (the waiter made the hold full) and its release script reads the
// queue and publishes, so the counts can see it; a cycle whose acquire went
// unanswered once leaves a marker (TestLateReplyFreshLock).
func TestUncontendedCycleIsLean(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, direct := locktest.NewLocker(t, srv)
	other, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	const n = 50
	// A first cycle loads the scripts and dials: not part of the count.
	if s, err := l.Lock(ctx, "lean:warm"); err != nil {
		t.Fatal(err)
	} else if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	before := allCommands(t, direct)
	for i := 0; i < n; i++ {
		s, err := l.Lock(ctx, "lean:"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	d := diffCommands(before, allCommands(t, direct))
	if d["evalsha"] != n || d["hdel"] != n {
		t.Fatalf("%d cycles sent %d scripts and %d HDEL, want %d of each: %v", n, d["evalsha"], d["hdel"], n, d)
	}
	var inside int64
	for name, calls := range d {
		switch name {
		case "evalsha", "hdel":
		case "hello", "subscribe", "ping":
			// The Locker's monitor connection (monitor.go), made once
			// while it holds leases: not part of a cycle.
		default:
			inside += calls
		}
	}
	if inside > 5*n {
		t.Errorf("%d uncontended cycles ran %d commands inside the scripts (%.1f per cycle), want at most 5: %v", n, inside, float64(inside)/n, d)
	}
	if left := direct.Keys(ctx, "lockgate:{lean:*").Val(); len(left) > 0 {
		t.Errorf("uncontended cycles left %d keys behind, want none: %v", len(left), left[:min(len(left), 5)])
	}
	for _, name := range []string{"zrange", "zadd", "zrem", "hmget", "del", "spublish", "publish", "time"} {
		if name == "time" {
			if d[name] != n {
				t.Errorf("TIME ran %d times in %d cycles, want once per acquire", d[name], n)
			}
			continue
		}
		if d[name] != 0 {
			t.Errorf("uncontended cycles ran %s %d times: %v", name, d[name], d)
		}
	}

	// Control: a release with a waiter reads the queue and publishes.
	s, err := l.Lock(ctx, "lean:busy")
	if err != nil {
		t.Fatal(err)
	}
	res := waitFor(ctx, other, "lean:busy", 5*time.Second)
	waitQueued(t, direct, "lean:busy", 1)
	before = allCommands(t, direct)
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	checkWoken(t, res, "lean:busy")
	d = diffCommands(before, allCommands(t, direct))
	if d["zrange"] == 0 || d["spublish"] != 1 {
		t.Fatalf("a release with a waiter ran zrange %d and spublish %d times, want both: %v", d["zrange"], d["spublish"], d)
	}
}

// The same uncontended cycles on a 3-master Cluster leave nothing behind
// either but the fence floors of their slots (one key per slot, however
// many names). Control: a lock still held is seen by the same scan.
func TestUncontendedCycleLeavesNothingOnCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	c := cl.Client(t)
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	const n = 60
	for i := 0; i < n; i++ {
		s, err := l.Lock(ctx, "lean:"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	held, err := l.Lock(ctx, "lean:held")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	var floors, locks int
	for _, srv := range cl.Servers {
		for _, k := range srv.Client(t).Keys(ctx, "lockgate:*").Val() {
			switch {
			case strings.HasSuffix(k, "}:fence"):
				floors++
			case k == "lockgate:{lean:held}":
				locks++
			default:
				t.Errorf("key left behind by uncontended cycles on the Cluster: %s", k)
			}
		}
	}
	if locks != 1 {
		t.Fatalf("control: the held lock's key was seen %d times on the masters, want once", locks)
	}
	if floors == 0 || floors > n+1 {
		t.Fatalf("%d fence floors for %d names, want between 1 and %d", floors, n+1, n+1)
	}
}

// One caller's lock and unlock wake none of the Locker's goroutines: the
// watchdog's scheduler, whose timer is already set to the lease's first
// renewal, is not woken when the Locker's last lease ends (it counts its idle
// time when that timer fires). Control: with the wake put back
// ("wake-on-idle"), every unlock wakes it.
func TestUncontendedCycleWakesNoGoroutine(t *testing.T) {
	// Alone, not side by side: it bounds a time tightly (see TestMain).
	srv := redistest.Start(t)
	const n = 100
	passes := func(mutants string) int64 {
		l, _ := locktest.NewLocker(t, srv, core.WithMutants(mutants))
		ctx := locktest.Context(t)
		cycle := func(name string) {
			s, err := l.Lock(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		cycle("wake:warm") // starts the watchdog's goroutines
		before := core.WatchdogPasses(l)
		for i := 0; i < n; i++ {
			cycle("wake:" + strconv.Itoa(i))
			if mutants != "" {
				// Let the scheduler take each wake-up before the next
				// cycle (a pending one absorbs the next): the control
				// counts them one by one.
				for j := 0; j < 100 && core.WatchdogPasses(l) < before+int64(i)+1; j++ {
					runtime.Gosched()
				}
			}
		}
		return core.WatchdogPasses(l) - before
	}
	if got := passes(""); got > n/10 {
		t.Errorf("%d uncontended cycles woke the watchdog's scheduler %d times, want (almost) none", n, got)
	}
	if got := passes("wake-on-idle"); got < n/2 {
		t.Fatalf("control: with the wake put back, %d cycles woke the scheduler %d times, want about %d", n, got, n)
	}
}

// maxCycleAllocs bounds the allocations of one uncontended Lock and Unlock
// with the defaults (TTL 30s, wait 2s, watchdog on) on a client with
// ContextTimeoutEnabled, go-redis's own included: measured 30 (31 under
// the race detector), a little headroom above it. Of those, go-redis makes
// about 9 (its commands, its pool's check of a connection, replies;
// PoolStats, the prober's check for a connection, only once a millisecond:
// poolIdle in reach.go); the two calls' contexts 2 (their deadlines' timers
// and channels are shared: deadline.go); the rest are the cycle's own: the
// lock's names and the owner (its id the tail of its done marker's name),
// boxed for the scripts (9), the
// acquisition, hold and lease with its context (5), the two commands'
// arguments (2) and the calls bounded runs (2).
const maxCycleAllocs = 32

// An uncontended Lock and Unlock allocates at most maxCycleAllocs times, so
// that a change that adds allocations to the path every call takes fails
// here rather than only in the benchmarks. The keys are made beforehand (the
// caller's allocation, not the cycle's). Under the race detector sync.Pool
// drops some of what it is given, so go-redis's pools allocate a few more.
func TestUncontendedCycleAllocs(t *testing.T) {
	srv := redistest.Start(t)
	o := srv.Options()
	o.ContextTimeoutEnabled = true
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	l := locktest.Locker(t, c)
	ctx := context.Background()
	const runs = 200
	keys := make([]string, runs+1) // AllocsPerRun runs once more to warm up
	for i := range keys {
		keys[i] = "allocs:" + strconv.Itoa(i)
	}
	i := 0
	allocs := testing.AllocsPerRun(runs, func() {
		s, err := l.Lock(ctx, keys[i])
		i++
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
	bound := float64(maxCycleAllocs)
	if raceEnabled {
		bound += 4
	}
	t.Logf("%.0f allocations per uncontended cycle", allocs)
	if allocs > bound {
		t.Errorf("an uncontended Lock and Unlock allocated %.0f times, want at most %.0f", allocs, bound)
	}
}

// A contended handover runs no command for what the queue's head already
// told: the release that hands the lock to the first waiter while another
// waits behind it asks nothing more of the queue (the head's look says
// others follow, and the new holder is marked to look at the queue when it
// releases; a semaphore's release looks at the queue once, to know whether
// anyone waits), and a waiter that joins a queue whose keys already outlive
// its entry moves no expiry. Controls, in the same run: the first join does
// move the queue's expiry (PEXPIREAT of both keys), and the last handover of
// a lock, with no one behind, leaves its holder unmarked.
func TestContendedHandoverIsLean(t *testing.T) {
	t.Parallel()
	for _, kind := range []struct {
		name   string
		take   func(l *core.Locker, ctx context.Context, key string, opts ...core.LockOption) (*core.Lease, error)
		hash   string
		exists int64 // EXISTS a handing-over release runs
	}{
		{"lock", (*core.Locker).Lock, "lockgate:{lean:handover}", 0},
		{"semaphore", func(l *core.Locker, ctx context.Context, key string, opts ...core.LockOption) (*core.Lease, error) {
			return l.Semaphore(ctx, key, 1, opts...)
		}, "lockgate:{lean:handover}:sem", 1},
	} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			testHandoverIsLean(t, kind.take, kind.hash, kind.exists, kind.name == "lock")
		})
	}
}

func testHandoverIsLean(t *testing.T, take func(l *core.Locker, ctx context.Context, key string, opts ...core.LockOption) (*core.Lease, error), hash string, wantExists int64, marked bool) {
	srv := redistest.Start(t)
	holder, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	const key = "lean:handover"
	type got struct {
		s   *core.Lease
		err error
	}
	var waiters [2]*core.Locker
	for i := range waiters {
		waiters[i], _ = locktest.NewLocker(t, srv)
		locktest.Warm(t, waiters[i])
	}
	wait := func(l *core.Locker) <-chan got {
		ch := make(chan got, 1)
		go func() {
			s, err := take(l, ctx, key, core.WithWait(20*time.Second), core.WithTTL(time.Minute))
			ch <- got{s, err}
		}()
		return ch
	}
	held := func(ch <-chan got) *core.Lease {
		t.Helper()
		g := <-ch
		if g.err != nil {
			t.Fatal(g.err)
		}
		return g.s
	}
	s, err := take(holder, ctx, key, core.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}

	// A semaphore's join is two attempts: the check after the waiter's new
	// subscription, which runs on a goroutine of its own after the waiter
	// queued, wakes every waiter of a hash without an owner (see
	// waitRoom.check). joined waits for them (bounded: nothing outside the
	// Locker signals them), so that no attempt falls into the next count.
	attempts := int64(1)
	if !marked {
		attempts = 2
	}
	joined := func(before map[string]int64, queued int64) map[string]int64 {
		t.Helper()
		waitQueuedOn(t, direct, hash, queued)
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			d := diffCommands(before, allCommands(t, direct))
			if d["evalsha"] >= attempts || time.Now().After(deadline) {
				return d
			}
		}
	}
	before := allCommands(t, direct)
	first := wait(waiters[0])
	if d := joined(before, 1); d["evalsha"] != attempts || d["pexpireat"] != 2 {
		t.Fatalf("the first waiter's join ran %d scripts and moved the queue's expiry %d times, want %d and 2 (both keys): %v", d["evalsha"], d["pexpireat"], attempts, d)
	}
	before = allCommands(t, direct)
	second := wait(waiters[1])
	if d := joined(before, 2); d["evalsha"] != attempts || d["pexpireat"] != 0 || d["pexpiretime"] != attempts {
		t.Errorf("the second waiter's join ran %d scripts, PEXPIREAT %d and PEXPIRETIME %d times, want %d, 0 and %d: %v", d["evalsha"], d["pexpireat"], d["pexpiretime"], attempts, attempts, d)
	}

	before = allCommands(t, direct)
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	d := diffCommands(before, allCommands(t, direct))
	if d["exists"] != wantExists || d["spublish"] != 1 {
		t.Errorf("the handover to the first waiter ran EXISTS %d and SPUBLISH %d times, want %d and 1: %v", d["exists"], d["spublish"], wantExists, d)
	}
	a := held(first)
	if w, _ := direct.HGet(ctx, hash, "w").Result(); marked && w != "1" {
		t.Errorf("the first waiter holds the lock with another behind it, unmarked (w = %q): its release would not look at the queue", w)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	b := held(second)
	if w, err := direct.HGet(ctx, hash, "w").Result(); marked && err != redis.Nil {
		t.Errorf("the last waiter holds the lock with no one behind it, yet marked (w = %q, %v)", w, err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A hold taken with no one waiting is lean (its hash one field, named by its
// owner), which its holder releases with one HDEL; a waiter that joins turns
// it full first, so that the holder's HDEL finds nothing and its release
// script hands the lock to the waiter at once. On one server and on a
// 3-master Cluster. Control: lean-stays (the join leaves the lean field
// beside the full form): the holder's HDEL deletes its field and reports the
// lock released, the full form still names the holder, and the waiter is
// not handed the lock within its budget.
func TestLeanHoldHandsOn(t *testing.T) {
	fixedAndControl(t, "lean-stays", func(t *testing.T, control bool, opts []core.Option) {
		onSingleAndCluster(t, func(t *testing.T, c redis.UniversalClient) {
			testLeanHoldHandsOn(t, c, control, opts)
		})
	})
}

func testLeanHoldHandsOn(t *testing.T, c redis.UniversalClient, control bool, opts []core.Option) {
	l, other := locktest.Locker(t, c, opts...), locktest.Locker(t, c, opts...)
	ctx := locktest.Context(t)
	const key, hash = "lean:handon", "lockgate:{lean:handon}"
	s, err := l.Lock(ctx, key, core.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if m := c.HGetAll(ctx, hash).Val(); len(m) != 1 || m[ownerIn(ctx, c, hash)] != strconv.FormatInt(s.Fence(), 10) {
		t.Fatalf("lock hash %v with no one waiting, want a lean hold with fence %d", m, s.Fence())
	}
	res := waitFor(ctx, other, key, 3*time.Second)
	waitQueued(t, c, key, 1)
	if m := c.HGetAll(ctx, hash).Val(); !control && (len(m) != 3 || m["owner"] == "" || m["w"] != "1") {
		t.Fatalf("lock hash %v with a waiter, want the full form (owner, fence, w)", m)
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if control {
		if r := <-res; r.err == nil && r.inTime {
			t.Fatal("control: the waiter was handed the lock though the join left the lean field")
		}
		return
	}
	checkWoken(t, res, key)
}

// A lock hash that is no hold (no owner, no readers, and not one field
// named by an owner: a leftover without expiry, such as the lone w an
// earlier version's grant at its waiter's entry end could leave) does not
// make the lock busy: Lock and TryLock take it, Inspect names no holder,
// and the release leaves nothing. On one server and on a 3-master Cluster.
// Control: lean-any-field (any lone field read as a lean hold): TryLock
// answers busy.
func TestLeftoverHashIsNoHold(t *testing.T) {
	fixedAndControl(t, "lean-any-field", func(t *testing.T, control bool, opts []core.Option) {
		onSingleAndCluster(t, func(t *testing.T, c redis.UniversalClient) {
			l := locktest.Locker(t, c, opts...)
			ctx := locktest.Context(t)
			for i, leftover := range []map[string]string{{"w": "1"}, {"t": "tag"}, {"fence": "7"}, {"w": "1", "t": "tag"}} {
				key := "leftover:" + strconv.Itoa(i)
				hash := locktest.RedisKey(key)
				if err := c.HSet(ctx, hash, leftover).Err(); err != nil {
					t.Fatal(err)
				}
				info, err := l.Inspect(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				s, err := l.TryLock(ctx, key)
				if control {
					if len(leftover) == 1 && err == nil {
						t.Fatalf("control: TryLock took the lock with the leftover %v read as any field's hold", leftover)
					}
					continue
				}
				if info.Held {
					t.Errorf("Inspect with the leftover %v = %+v, want no holder", leftover, info)
				}
				if err != nil {
					t.Fatalf("TryLock with the leftover %v = %v, want the lock", leftover, err)
				}
				if err := s.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if n := c.Exists(ctx, hash).Val(); n != 0 {
					t.Fatalf("after the release %s is left: %v", hash, c.HGetAll(ctx, hash).Val())
				}
				// The same for a waiting Lock.
				c.HSet(ctx, hash, leftover)
				if s, err = l.Lock(ctx, key, core.WithWait(time.Second)); err != nil {
					t.Fatalf("Lock with the leftover %v = %v, want the lock", leftover, err)
				}
				if err := s.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	})
}

// A waiter that leaves a free lock whose hash is a leftover (no hold)
// hands the lock to the next waiter at once, as it does when nothing is
// left: the leftover is no other owner's lean hold. The holder's hold is
// replaced by a lone w without expiry while two waiters queue; the first
// gives up, and the second, whose next wake is a minute away (the holder's
// TTL), must be handed the lock within its 3 s. The leftover is planted
// only once both waiters' Lockers have checked the lock after subscribing
// (a check that found it would wake them, and their attempts take it). On
// one server and on a 3-master Cluster. Control: leftover-blocks-handon
// (the leaving waiter takes any hash for a hold and hands nothing on): the
// second waiter's 3 s run out.
func TestWaiterLeavingALeftoverHandsOn(t *testing.T) {
	fixedAndControl(t, "leftover-blocks-handon", func(t *testing.T, control bool, opts []core.Option) {
		onSingleAndCluster(t, func(t *testing.T, c redis.UniversalClient) {
			holder := locktest.Locker(t, c)
			first := locktest.Locker(t, c, opts...)
			second := locktest.Locker(t, c)
			checked := [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}
			for i, l := range []*core.Locker{first, second} {
				core.OnChecked(l, func() {
					select {
					case checked[i] <- struct{}{}:
					default:
					}
				})
			}
			ctx := locktest.Context(t)
			const key = "leftover:handon"
			hash := locktest.RedisKey(key)
			resume := core.PauseWatchdog(holder)
			defer resume()
			if _, err := holder.Lock(ctx, key, core.WithTTL(time.Minute)); err != nil {
				t.Fatal(err)
			}
			fctx, leave := context.WithCancel(ctx)
			res1 := waitFor(fctx, first, key, 10*time.Second)
			waitQueued(t, c, key, 1)
			res2 := waitFor(ctx, second, key, 3*time.Second)
			waitQueued(t, c, key, 2)
			for _, ch := range checked {
				within(t, ch, 5*time.Second, "a waiter's check after subscribing")
			}
			if err := c.Del(ctx, hash).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.HSet(ctx, hash, "w", "1").Err(); err != nil {
				t.Fatal(err)
			}
			leave()
			if r := <-res1; !errors.Is(r.err, context.Canceled) {
				t.Fatalf("the first waiter, cancelled: %v", r.err)
			}
			r := <-res2
			if control {
				if r.err == nil && r.inTime {
					t.Fatal("control: the second waiter was handed the lock though the leaving waiter took the leftover for a hold")
				}
				return
			}
			if r.err != nil || !r.inTime {
				t.Fatalf("the second waiter = %v (in time: %v), want the lock handed on by the first's leaving", r.err, r.inTime)
			}
		})
	})
}
