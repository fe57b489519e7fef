package core_test

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// semKey is the Redis key of the holders of the semaphore named name.
func semKey(name string) string { return "lockgate:{" + name + "}:sem" }

// semHolders counts the live permits of the semaphore named name in Redis
// (its hash's fields but the permits count, whose expiry has not passed).
func semHolders(t *testing.T, c redis.UniversalClient, name string) int {
	t.Helper()
	ctx := context.Background()
	m, err := c.HGetAll(ctx, semKey(name)).Result()
	if err != nil {
		t.Fatal(err)
	}
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k, v := range m {
		if k == "n" {
			continue
		}
		exp, _, _ := strings.Cut(v, "|")
		if ms, _ := strconv.ParseInt(exp, 10, 64); ms > now.UnixMilli() {
			n++
		}
	}
	return n
}

// semScript matches the semaphore's script "acquire" or "release" on the
// semaphore named name.
func semScript(name, sem string) redistest.Matcher {
	return redistest.MatchCommand("evalsha", fmt.Sprintf("%x", sha1.Sum([]byte(core.SemaphoreScriptSource(name)))), semKey(sem))
}

// A semaphore of three permits: three leases at once, a fourth is busy;
// TTL and Extend act on one permit; nothing is left in Redis once every
// permit is released.
func TestSemaphoreBasics(t *testing.T) {
	srv := redistest.Start(t)
	l, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	var leases []*core.Lease
	for i := 0; i < 3; i++ {
		s, err := l.Semaphore(ctx, "basic", 3)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, s)
	}
	if n := semHolders(t, direct, "basic"); n != 3 {
		t.Fatalf("%d holders in Redis, want 3", n)
	}
	if d, err := leases[0].TTL(ctx); err != nil || d <= 0 || d > core.DefaultTTL {
		t.Fatalf("TTL = %v, %v", d, err)
	}
	if err := leases[0].Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if d, err := leases[0].TTL(ctx); err != nil || d <= core.DefaultTTL {
		t.Fatalf("TTL after Extend(1m) = %v, %v", d, err)
	}
	for _, s := range leases {
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if keys := direct.Keys(ctx, "lockgate:{basic}*").Val(); len(keys) != 0 {
		t.Fatalf("left in Redis after every permit was released: %v", keys)
	}
}

// semContention runs 12 goroutines over two Lockers (on clients a and b),
// each taking a permit of name (of permits) three times in turn, and
// returns the most that were inside at once and how many entries there
// were.
func semContention(t *testing.T, a, b redis.UniversalClient, name string, permits int) (maxIn, ran int32) {
	t.Helper()
	ls := []*core.Locker{locktest.Locker(t, a), locktest.Locker(t, b)}
	ctx := locktest.Context(t)
	g := locktest.NewGauge()
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				s, err := ls[i%2].Semaphore(ctx, name, permits, core.WithWait(30*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				g.Enter()
				time.Sleep(20 * time.Millisecond) // the work
				g.Exit()
				if err := s.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	return g.Max(), g.Ran()
}

// testAtMostPermits: at most three holders of a semaphore of three, every
// caller served. Control: the same workload with a count that does not
// limit it (twelve) is seen above three by the same gauge.
func testAtMostPermits(t *testing.T, a, b redis.UniversalClient) {
	t.Run("AtMostPermits", func(t *testing.T) {
		maxIn, ran := semContention(t, a, b, "sem:n", 3)
		t.Logf("3 permits, 12 callers x 3: at most %d inside at once, %d entries", maxIn, ran)
		if maxIn > 3 {
			t.Fatalf("%d holders inside at once, over the 3 permits", maxIn)
		}
		if ran != 36 {
			t.Fatalf("%d of 36 entries", ran)
		}
		if maxIn < 2 {
			t.Fatalf("probe: at most %d inside at once: the permits were never shared", maxIn)
		}
	})
	t.Run("AtMostPermitsControl", func(t *testing.T) {
		maxIn, _ := semContention(t, a, b, "sem:ctl", 12)
		t.Logf("control, 12 permits: %d inside at once", maxIn)
		if maxIn <= 3 {
			t.Fatalf("control: the gauge saw at most %d inside with 12 permits: it cannot see a breach", maxIn)
		}
	})
}

func TestSemaphoreAtMostPermits(t *testing.T) {
	srv := redistest.Start(t)
	testAtMostPermits(t, srv.Client(t), srv.Client(t))
}

func TestSemaphoreOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	a, b := cl.Client(t), cl.Client(t)
	testAtMostPermits(t, a, b)
	t.Run("FIFO", func(t *testing.T) { testSemaphoreFIFO(t, a, b, b) })
}

// On Sentinel, also WithReplicaAck: a permit is on the replica when
// Semaphore returns; with the replica stopped, ErrNotReplicated within the
// budget and no permit left held. Control: a Locker without the option
// takes its permit from the same master meanwhile.
func TestSemaphoreOnSentinel(t *testing.T) {
	sen := redistest.StartSentinel(t)
	a, b := sen.Client(t), sen.Client(t)
	testAtMostPermits(t, a, b)
	t.Run("FIFO", func(t *testing.T) { testSemaphoreFIFO(t, a, b, sen.Master.Client(t)) })
	t.Run("ReplicaAck", func(t *testing.T) {
		acked := locktest.Locker(t, sen.Client(t), core.WithReplicaAck(1, 300*time.Millisecond))
		plain := locktest.Locker(t, sen.Client(t))
		master, replica := sen.Master.Client(t), sen.Replica.Client(t)
		ctx := locktest.Context(t)
		waitReplicaAcks(t, master)
		s, err := acked.Semaphore(ctx, "sem:ra", 2)
		if err != nil {
			t.Fatal(err)
		}
		if n := semHolders(t, replica, "sem:ra"); n != 1 {
			t.Fatalf("%d permits on the replica right after Semaphore, want 1", n)
		}
		if err := sen.Replica.Pause(); err != nil {
			t.Fatal(err)
		}
		defer sen.Replica.Resume()
		start := time.Now()
		_, err = acked.Semaphore(ctx, "sem:ra", 2, core.WithWait(500*time.Millisecond))
		if !errors.Is(err, core.ErrNotReplicated) {
			t.Fatalf("Semaphore with the replica stopped = %v, want ErrNotReplicated", err)
		}
		if d := time.Since(start); d > 600*time.Millisecond {
			t.Fatalf("it took %v, over its 500ms budget", d)
		}
		for i := 0; semHolders(t, master, "sem:ra") != 1; i++ {
			if i == 200 {
				t.Fatalf("%d permits held on the master after the refused one, want the first only", semHolders(t, master, "sem:ra"))
			}
			time.Sleep(10 * time.Millisecond) // the undo runs in the background
		}
		ps, err := plain.Semaphore(ctx, "sem:ra", 2, core.WithWait(core.NoWait))
		if err != nil {
			t.Fatalf("control: a Locker without WithReplicaAck = %v", err)
		}
		ps.Unlock(ctx)
		s.Unlock(ctx)
	})
}

// semQueueLen is the number of waiters in the semaphore name's queue.
func semQueueLen(c redis.UniversalClient, name string) int64 {
	return c.ZCard(context.Background(), semKey(name)+":q").Val()
}

// testSemaphoreFIFO: with both permits of a semaphore of two held, six
// waiters on two Lockers (clients a, b) get a permit in the order they
// joined its queue (direct sees the queue): each release hands its permit
// to the first live waiter. Control: the same waiters polling with single
// attempts instead of queueing are served in some other order.
func testSemaphoreFIFO(t *testing.T, a, b, direct redis.UniversalClient) {
	ls := []*core.Locker{locktest.Locker(t, a), locktest.Locker(t, b)}
	ctx := locktest.Context(t)
	run := func(name string, queue bool) []int {
		first, err := ls[0].Semaphore(ctx, name, 2, core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		second, err := ls[1].Semaphore(ctx, name, 2, core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 6
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		polling := make(chan struct{})
		for i := 0; i < waiters; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var s *core.Lease
				var err error
				if queue {
					s, err = ls[i%2].Semaphore(ctx, name, 2, core.WithWait(20*time.Second), core.WithTTL(time.Minute))
				} else {
					<-polling
					for {
						s, err = ls[i%2].Semaphore(ctx, name, 2, core.WithWait(core.NoWait), core.WithTTL(time.Minute))
						if !errors.Is(err, core.ErrNotObtained) {
							break
						}
						time.Sleep(time.Millisecond) // a naive caller's poll
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				s.Unlock(ctx)
			}()
			if queue {
				for j := 0; semQueueLen(direct, name) != int64(i+1); j++ {
					if j == 500 {
						t.Fatalf("waiter %d never queued", i)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}
		close(polling)
		if err := first.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		second.Unlock(ctx)
		return order
	}
	order := run("sem:fifo", true)
	want := []int{0, 1, 2, 3, 4, 5}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("permits went in the order %v, want the joining order %v", order, want)
	}
	// The polling callers start together, so their order is left to chance:
	// up to three rounds, one of which must break the start order.
	for round := 0; ; round++ {
		ctl := run(fmt.Sprintf("sem:fifo-ctl%d", round), false)
		t.Logf("queued: %v; control (polling): %v", order, ctl)
		if len(ctl) != 6 {
			t.Fatalf("control: %d of 6 served", len(ctl))
		}
		if fmt.Sprint(ctl) != fmt.Sprint(want) {
			break
		}
		if round == 2 {
			t.Fatalf("control: polling callers were served in their start order %v three times: the check cannot tell", ctl)
		}
	}
}

func TestSemaphoreFIFO(t *testing.T) {
	srv := redistest.Start(t)
	testSemaphoreFIFO(t, srv.Client(t), srv.Client(t), srv.Client(t))
}
