package core_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// scriptHook counts the lock calls (isLockCall) a client sends on their own
// and inside pipelines.
type scriptHook struct {
	alone, piped, pipelines atomic.Int64
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isLockCall(cmd) {
			h.alone.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(cmds)
		return next(ctx, cmds)
	}
}

// count counts the scripts of a pipeline, and returns how many.
func (h *scriptHook) count(cmds []redis.Cmder) int {
	n := 0
	for _, c := range cmds {
		if isLockCall(c) {
			n++
		}
	}
	if n > 0 {
		h.pipelines.Add(1)
		h.piped.Add(int64(n))
	}
	return n
}

// isLockCall: a script, or the HDEL that releases a lean hold.
func isLockCall(c redis.Cmder) bool {
	return c.Name() == "evalsha" || c.Name() == "eval" || c.Name() == "hdel"
}

func hookedClient(t *testing.T, addr string) (*redis.Client, *scriptHook) {
	o := &redis.Options{Addr: addr, PoolSize: 80}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	h := &scriptHook{}
	c.AddHook(h)
	return c, h
}

// cycles runs n Lock/Unlock cycles on distinct keys from g goroutines.
func cycles(t *testing.T, l *core.Locker, g, n int) {
	t.Helper()
	ctx := locktest.Context(t)
	var wg sync.WaitGroup
	var seq atomic.Int64
	errs := make(chan error, g)
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for int(seq.Add(1)) <= n {
				s, err := l.Lock(ctx, "co:"+strconv.FormatInt(seq.Load(), 10)+":"+strconv.Itoa(i))
				if err == nil {
					err = s.Unlock(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// Concurrent acquires and releases of one Locker share round trips: while
// calls are in flight the next ones go together as one pipeline; a caller
// alone is sent at once, on its own. Control: WithoutCoalescing sends
// every script on its own.
func TestConcurrentCallsAreCoalesced(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c, h := hookedClient(t, srv.Addr)
	l := locktest.Locker(t, c)
	cycles(t, l, 1, 50)
	if h.piped.Load() != 0 || h.alone.Load() < 100 {
		t.Fatalf("one caller: %d scripts alone, %d piped; want every script sent at once on its own", h.alone.Load(), h.piped.Load())
	}
	h.alone.Store(0)
	const n = 2000
	cycles(t, l, 64, n)
	alone, piped, pipelines := h.alone.Load(), h.piped.Load(), h.pipelines.Load()
	t.Logf("64 callers, %d cycles: %d scripts alone, %d in %d pipelines (%.1f per pipeline)", n, alone, piped, pipelines, float64(piped)/float64(max(pipelines, 1)))
	if alone+piped < 2*n {
		t.Fatalf("%d scripts for %d cycles", alone+piped, n)
	}
	if piped < n || float64(piped)/float64(pipelines) < 2 {
		t.Fatalf("64 callers: %d of %d scripts piped, %.1f per pipeline; want most of them, several per pipeline", piped, alone+piped, float64(piped)/float64(max(pipelines, 1)))
	}

	// Control: without coalescing nothing is piped.
	c2, h2 := hookedClient(t, srv.Addr)
	cycles(t, locktest.Locker(t, c2, core.WithoutCoalescing()), 64, 500)
	if h2.piped.Load() != 0 || h2.alone.Load() < 1000 {
		t.Fatalf("WithoutCoalescing: %d scripts alone, %d piped; want all alone", h2.alone.Load(), h2.piped.Load())
	}
}

// A pipeline that meets an empty script cache (a restart, SCRIPT FLUSH)
// sends those calls again with the scripts' source. The calls are made to
// queue behind round trips held at a proxy, the cache is flushed while
// they wait, and each must succeed; the probe shows EVAL went in a pipeline.
func TestCoalescedCallsReloadScripts(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	direct := srv.Client(t)
	p := redistest.StartProxy(t, srv.Addr)
	c, h := hookedClient(t, p.Addr)
	l := locktest.Locker(t, c)
	ctx := locktest.Context(t)
	cycles(t, l, 1, 1) // scripts loaded, server checked
	var holds []*redistest.Hold
	for i := 0; i < 4; i++ { // every slot
		holds = append(holds, p.HoldReply(redistest.MatchCommand("evalsha", "lockgate:{slot:"), 500*time.Millisecond))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	lockUnlock := func(key string) {
		defer wg.Done()
		s, err := l.Lock(ctx, key, core.WithWait(5*time.Second))
		if err == nil {
			err = s.Unlock(ctx)
		}
		errs <- err
	}
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go lockUnlock("slot:" + strconv.Itoa(i))
	}
	for _, hd := range holds {
		within(t, hd.Matched(), 5*time.Second, "a held acquire")
	}
	if err := direct.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go lockUnlock("queued:" + strconv.Itoa(i))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if h.piped.Load() == 0 {
		t.Fatal("no call was piped: the calls did not queue, the scenario did not happen")
	}
	if !strings.Contains(direct.Info(ctx, "commandstats").Val(), "\ncmdstat_eval:") {
		t.Fatal("no EVAL after the flush: the cache was not found empty")
	}
}

// A call queued behind round trips that do not come back returns within its
// caller's budget, as unavailable, and what it did once sent is undone:
// nothing stays held. The four slots are filled by acquires whose replies a
// proxy holds for 1s; the probe shows the queued call did reach Redis
// afterwards (its key's done marker). Both client kinds: with a default
// client the budget is kept around the call, with ContextTimeoutEnabled by
// the queue itself.
func TestQueuedCallWithinBudget(t *testing.T) {
	t.Parallel()
	for _, ctxTimeout := range []bool{false, true} {
		t.Run("ContextTimeoutEnabled="+strconv.FormatBool(ctxTimeout), func(t *testing.T) {
			srv := redistest.Start(t)
			direct := srv.Client(t)
			p := redistest.StartProxy(t, srv.Addr)
			c := redis.NewClient(&redis.Options{Addr: p.Addr, ContextTimeoutEnabled: ctxTimeout})
			t.Cleanup(func() { c.Close() })
			l := locktest.Locker(t, c)
			ctx := locktest.Context(t)
			locktest.Warm(t, l)
			var holds []*redistest.Hold
			for i := 0; i < 4; i++ {
				holds = append(holds, p.HoldReply(redistest.MatchCommand("evalsha", "lockgate:{slow:"), time.Second))
			}
			var wg sync.WaitGroup
			for i := 0; i < 4; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					if s, err := l.Lock(ctx, "slow:"+strconv.Itoa(i), core.WithWait(5*time.Second)); err == nil {
						s.Unlock(ctx)
					}
				}(i)
			}
			for _, h := range holds {
				within(t, h.Matched(), 5*time.Second, "a held acquire")
			}
			start := time.Now()
			_, err := l.Lock(ctx, "queued", core.WithWait(200*time.Millisecond))
			took := time.Since(start)
			if !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrNotObtained) {
				t.Fatalf("queued Lock = %v, want ErrUnavailable", err)
			}
			if took > 200*time.Millisecond+budgetSlack {
				t.Fatalf("queued Lock took %v with a 200ms budget", took)
			}
			wg.Wait()
			for i := 0; ; i++ {
				markers := direct.Keys(ctx, "lockgate:{queued}:done:*").Val()
				held := direct.Exists(ctx, "lockgate:{queued}").Val() == 1
				if len(markers) > 0 && !held {
					break
				}
				if i == 100 {
					t.Fatalf("5s after: lock held %v, done markers %v; want the queued call undone", held, markers)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}
