package core_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// commandCounts reads INFO: the total commands processed (script-internal
// calls included) and the commands clients sent (everything but the calls
// made from scripts and the INFO calls themselves), per command name.
type commandCounts struct {
	total  int64
	client map[string]int64
}

func readCommands(t testing.TB, c *redis.Client) commandCounts {
	t.Helper()
	info, err := c.Info(context.Background(), "stats", "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	cc := commandCounts{client: map[string]int64{}}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			cc.total, _ = strconv.ParseInt(v, 10, 64)
		}
		// cmdstat_evalsha:calls=12,usec=...
		name, rest, ok := strings.Cut(line, ":calls=")
		if !ok {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		switch name {
		case "evalsha", "eval", "subscribe", "unsubscribe", "ssubscribe", "sunsubscribe", "ping", "publish", "spublish", "set", "get", "del", "hget", "time":
			calls, _, _ := strings.Cut(rest, ",")
			cc.client[name], _ = strconv.ParseInt(calls, 10, 64)
		}
	}
	return cc
}

// clientCommands is the number of commands clients sent between two reads:
// scripts, Pub/Sub (un)subscriptions, pings and the waiters' checks (HGET).
func clientCommands(a, b commandCounts) int64 {
	var n int64
	for _, name := range []string{"evalsha", "eval", "subscribe", "unsubscribe", "ssubscribe", "sunsubscribe", "ping", "hget"} {
		n += b.client[name] - a.client[name]
	}
	return n
}

// 32 waiters on one key, woken by release notifications only (the
// timer fallback is off, and the holder's TTL is far beyond the wait
// budget, so without Pub/Sub every waiter would time out). Each release is
// followed by the next acquisition within a few round trips, and the
// commands Redis processes per acquisition stay low. (Not side by side with
// the other tests: it measures handoffs in round trips, which a shared
// machine stretches.)
func TestWakeUpOnRelease(t *testing.T) {
	srv := redistest.Start(t)
	stats := srv.Client(t)
	lockers := make([]*core.Locker, 2)
	for i := range lockers {
		lockers[i], _ = locktest.NewLocker(t, srv, core.WithWait(20*time.Second), core.WithTTL(time.Minute))
	}
	ctx := locktest.Context(t)

	// Round-trip time of this machine right now, for the ratio.
	rtts := make([]time.Duration, 50)
	for i := range rtts {
		t0 := time.Now()
		stats.Ping(ctx)
		rtts[i] = time.Since(t0)
	}
	slices.Sort(rtts)
	rtt := rtts[len(rtts)/2]

	first, err := lockers[0].Lock(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 32
	var mu sync.Mutex
	type span struct{ acquired, released time.Time }
	var spans []span
	var ready, wg sync.WaitGroup
	errs := make(chan error, waiters)
	before := readCommands(t, stats)
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		ready.Add(1)
		go func(i int) {
			defer wg.Done()
			ready.Done()
			s, err := lockers[i%2].Lock(ctx, "hot")
			if err != nil {
				errs <- err
				return
			}
			acq := time.Now()
			rel := time.Now()
			if err := s.Unlock(ctx); err != nil {
				errs <- err
			}
			mu.Lock()
			spans = append(spans, span{acq, rel})
			mu.Unlock()
		}(i)
	}
	ready.Wait()
	// Let every waiter reach Redis and queue: wait until both Lockers'
	// Pub/Sub subscriptions exist (a signal from the server, not a sleep).
	waitSubscribers(t, stats, "lockgate:{hot}", 2)
	released := time.Now()
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("waiter: %v", err)
	}
	after := readCommands(t, stats)
	cmds := clientCommands(before, after)
	total := after.total - before.total - 1 // minus the first INFO
	slices.SortFunc(spans, func(a, b span) int { return a.acquired.Compare(b.acquired) })
	gaps := make([]time.Duration, 0, waiters)
	prev := released
	for _, s := range spans {
		gaps = append(gaps, s.acquired.Sub(prev))
		prev = s.released
	}
	slices.Sort(gaps)
	p50 := gaps[len(gaps)/2]
	perAcq := float64(cmds) / waiters
	t.Logf("rtt p50 %v; release→next acquisition p50 %v (%.1f RTT), max %v; per acquisition: %.1f client commands, %.1f commands processed incl. script calls",
		rtt, p50, float64(p50)/float64(rtt), gaps[len(gaps)-1], perAcq, float64(total)/waiters)
	// Woken by the release, the next waiter needs about two round trips; a
	// timer-driven wake (none is configured) would take the holder's TTL, a
	// minute. 40 leaves room for a loaded machine and -race.
	if p50 > 40*rtt {
		t.Errorf("handoff p50 %v is over 40 round trips (%v)", p50, rtt)
	}
	if perAcq > 6 {
		t.Errorf("%.1f commands per acquisition: waiters are polling", perAcq)
	}
}

// waitSubscribers waits (bounded) until channel has n subscribers.
func waitSubscribers(t *testing.T, c *redis.Client, channel string, n int64) {
	t.Helper()
	for i := 0; i < 500; i++ {
		m, err := c.PubSubShardNumSub(context.Background(), channel).Result()
		if err == nil && m[channel] >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("channel %s never reached %d subscribers", channel, n)
}

// The Pub/Sub subscription lives only while somebody waits.
func TestUnsubscribeAfterLastWaiter(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, c := locktest.NewLocker(t, srv)
	b, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	held, err := a.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		s, err := b.Lock(ctx, "k", core.WithWait(10*time.Second))
		if err == nil {
			err = s.Unlock(ctx)
		}
		got <- err
	}()
	waitSubscribers(t, c, "lockgate:{k}", 1)
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		n := c.PubSubShardNumSub(ctx, "lockgate:{k}").Val()["lockgate:{k}"]
		if n == 0 {
			break
		}
		if i == 200 {
			t.Fatalf("still %d subscribers after the last waiter left", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
