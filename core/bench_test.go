package core_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// The benchmarks share one server per run so floor and lockgate are
// measured against the same process, one after the other.

var (
	benchOnce sync.Once
	benchSrv  *redistest.Server
	benchErr  error
	benchSeq  atomic.Int64
)

func benchServer(b *testing.B) *redistest.Server {
	benchOnce.Do(func() { benchSrv, benchErr = redistest.NewServer() })
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchSrv
}

func benchClient(b *testing.B) *redis.Client {
	o := benchServer(b).Options()
	o.PoolSize = 80 // room for 64 parallel callers, for floor and lockgate alike
	o.MaxRetries = 0
	c := redis.NewClient(o)
	b.Cleanup(func() { c.Close() })
	return c
}

// benchClientKind is benchClient, with ContextTimeoutEnabled for kinds
// "ctxtimeout" and "ctxnocoal".
func benchClientKind(b *testing.B, kind string) *redis.Client {
	if kind != "ctxtimeout" && kind != "ctxnocoal" {
		return benchClient(b)
	}
	o := benchServer(b).Options()
	o.PoolSize, o.MaxRetries, o.ContextTimeoutEnabled = 80, 0, true
	c := redis.NewClient(o)
	b.Cleanup(func() { c.Close() })
	return c
}

func distinctKey() string { return "bench:" + strconv.FormatInt(benchSeq.Add(1), 10) }

var casDel = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// floorCycle is the two-round-trip floor of any safe lock: SET NX PX, then
// a compare-and-delete script, on a distinct key.
func floorCycle(b *testing.B, ctx context.Context, c *redis.Client) {
	k := distinctKey()
	if ok, err := c.SetNX(ctx, k, "tok", 30*time.Second).Result(); err != nil || !ok {
		b.Error("set", err)
		return
	}
	if err := casDel.Run(ctx, c, []string{k}, "tok").Err(); err != nil {
		b.Error("del", err)
	}
}

// lockCycle is an uncontended Lock and Unlock on a distinct key.
func lockCycle(b *testing.B, ctx context.Context, l *core.Locker) {
	s, err := l.Lock(ctx, distinctKey())
	if err != nil {
		b.Error(err)
		return
	}
	if err := s.Unlock(ctx); err != nil {
		b.Error(err)
	}
}

// parallel runs body at a total parallelism of p goroutines.
func parallel(b *testing.B, p int, body func()) {
	if p == 1 {
		for i := 0; i < b.N; i++ {
			body()
		}
		return
	}
	b.SetParallelism(max(1, p/runtimeProcs()))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body()
		}
	})
}

// BenchmarkFloor is the two-round-trip floor of any safe lock: SET NX PX,
// then a compare-and-delete script, on distinct keys.
func BenchmarkFloor(b *testing.B) {
	for _, p := range []int{1, 16, 64} {
		b.Run("p="+strconv.Itoa(p), func(b *testing.B) {
			c := benchClient(b)
			ctx := context.Background()
			casDel.Load(ctx, c)
			b.ReportAllocs()
			b.ResetTimer()
			parallel(b, p, func() { floorCycle(b, ctx, c) })
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
		})
	}
}

// BenchmarkLockUnlock is an uncontended Lock then Unlock on distinct keys,
// with go-redis's default client (coalesced, and with WithoutCoalescing)
// and with ContextTimeoutEnabled (coalesced: ctxtimeout, and with
// WithoutCoalescing: ctxnocoal, which, unlike uncoalesced, has no goroutine
// a call to tell coalescing's share apart; see BenchmarkVsFloor).
func BenchmarkLockUnlock(b *testing.B) {
	for _, kind := range []string{"default", "uncoalesced", "ctxtimeout", "ctxnocoal"} {
		for _, p := range []int{1, 16, 64} {
			b.Run("client="+kind+"/p="+strconv.Itoa(p), func(b *testing.B) {
				var opts []core.Option
				if kind == "uncoalesced" || kind == "ctxnocoal" {
					opts = append(opts, core.WithoutCoalescing())
				}
				l := locktest.Locker(b, benchClientKind(b, kind), opts...)
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				parallel(b, p, func() { lockCycle(b, ctx, l) })
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
			})
		}
	}
}

// BenchmarkContended: 2 Lockers × 16 goroutines on one key with a critical
// section of 0 and 2ms. b.N acquisitions in all.
func BenchmarkContended(b *testing.B) {
	for _, cs := range []time.Duration{0, 2 * time.Millisecond} {
		b.Run("cs="+cs.String(), func(b *testing.B) { benchContended(b, cs) })
	}
}

func benchContended(b *testing.B, cs time.Duration) {
	const lockers, perLocker = 2, 16
	srv := benchServer(b)
	stats := benchClient(b)
	ls := make([]*core.Locker, lockers)
	for i := range ls {
		ls[i] = locktest.Locker(b, benchClient(b), core.WithWait(2*time.Second))
	}
	ctx := context.Background()
	key := "contended:" + strconv.FormatInt(benchSeq.Add(1), 10)
	rtt := medianRTT(stats)
	before := readCommandsB(b, stats)
	_ = srv

	var remaining atomic.Int64
	remaining.Store(int64(b.N))
	var last atomic.Int64 // goroutine id of the previous holder
	last.Store(-1)
	var handoffs, timeouts, inside atomic.Int64
	counts := make([]int, lockers*perLocker)
	waits := make([][]time.Duration, lockers*perLocker)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for g := 0; g < lockers*perLocker; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			l := ls[g%lockers]
			for remaining.Add(-1) >= 0 {
				t0 := time.Now()
				s, err := l.Lock(ctx, key)
				if errors.Is(err, core.ErrNotObtained) {
					timeouts.Add(1)
					continue
				}
				if err != nil {
					b.Error(err)
					return
				}
				waits[g] = append(waits[g], time.Since(t0))
				if prev := last.Swap(int64(g)); prev != int64(g) {
					handoffs.Add(1)
				}
				counts[g]++
				if cs > 0 {
					t1 := time.Now()
					time.Sleep(cs) // the critical section's work
					inside.Add(int64(time.Since(t1)))
				}
				if err := s.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	after := readCommandsB(b, stats)

	var all []time.Duration
	acq := 0
	for g := range waits {
		all = append(all, waits[g]...)
		acq += counts[g]
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds())
	}
	lo, hi := slices.Min(counts), slices.Max(counts)
	perLockerAcq := make([]int, lockers)
	for g, n := range counts {
		perLockerAcq[g%lockers] += n
	}
	b.ReportMetric(float64(slices.Min(perLockerAcq))/float64(max(slices.Max(perLockerAcq), 1)), "locker-min/max")
	b.ReportMetric(float64(acq)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(handoffs.Load())/elapsed.Seconds(), "handoffs/s")
	if cs > 0 {
		// Against the nominal section, and against the section as it really
		// lasted (a 2ms sleep overshoots on a loaded machine).
		rate := float64(handoffs.Load()) / elapsed.Seconds()
		b.ReportMetric(rate*(cs+rtt).Seconds(), "handoff-ratio")
		actual := time.Duration(inside.Load() / int64(max(acq, 1)))
		b.ReportMetric(rate*(actual+rtt).Seconds(), "handoff-ratio-actual-cs")
		b.ReportMetric(float64(actual.Microseconds()), "cs-µs")
	}
	b.ReportMetric(pct(0.50), "p50-wait-µs")
	b.ReportMetric(pct(0.99), "p99-wait-µs")
	b.ReportMetric(float64(clientCommandsB(before, after))/float64(max(acq, 1)), "cmds/acq")
	b.ReportMetric(float64(lo)/float64(max(hi, 1)), "min/max")
	b.ReportMetric(float64(timeouts.Load()), "timeouts")
	b.ReportMetric(float64(rtt.Microseconds()), "rtt-µs")
	b.ReportMetric(0, "ns/op")
}

func medianRTT(c *redis.Client) time.Duration {
	rtts := make([]time.Duration, 101)
	for i := range rtts {
		t0 := time.Now()
		c.Ping(context.Background())
		rtts[i] = time.Since(t0)
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2]
}

func readCommandsB(b *testing.B, c *redis.Client) commandCounts { return readCommands(b, c) }

func clientCommandsB(a, b commandCounts) int64 { return clientCommands(a, b) }

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// BenchmarkVsFloor alternates a floor cycle and a lockgate cycle (distinct
// keys, uncontended, one caller) inside one loop, so both see the same
// machine state, and reports lockgate's cycles/s as a fraction of the
// floor's. (At high parallelism alternating inside one loop would only
// measure the shared queue; compare BenchmarkFloor/p=64 and
// BenchmarkLockUnlock/p=64 there.)
//
// client=ctxtimeout uses ContextTimeoutEnabled: go-redis itself then bounds
// each call by the caller's budget, and lockgate runs it on the caller's
// goroutine; client=default bounds it from a goroutine of its own.
func BenchmarkVsFloor(b *testing.B) {
	for _, kind := range []string{"default", "ctxtimeout"} {
		b.Run("client="+kind, func(b *testing.B) {
			c := benchClient(b)
			l := locktest.Locker(b, benchClientKind(b, kind))
			ctx := context.Background()
			casDel.Load(ctx, c)
			var floorNs, lockNs atomic.Int64
			b.ResetTimer()
			parallel(b, 1, func() {
				t0 := time.Now()
				floorCycle(b, ctx, c)
				t1 := time.Now()
				lockCycle(b, ctx, l)
				floorNs.Add(int64(t1.Sub(t0)))
				lockNs.Add(int64(time.Since(t1)))
			})
			b.ReportMetric(float64(floorNs.Load())/float64(lockNs.Load()), "lock/floor")
			b.ReportMetric(float64(floorNs.Load())/float64(b.N), "floor-ns")
			b.ReportMetric(float64(lockNs.Load())/float64(b.N), "lock-ns")
		})
	}
}
