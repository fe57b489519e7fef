package core_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// 10,000 leases with a 1s TTL held by one Locker for 3s: the
// watchdog renews them all (none lost, every key still there) with a
// goroutine count that does not grow with the number of leases.
func TestTenThousandLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	srv := redistest.Start(t)
	var renewed, renewErr, lost atomic.Int64
	obs := core.ObserverFunc(func(_ context.Context, e core.Event) {
		switch {
		case e.Kind == core.EventRenewed && e.Err == nil:
			renewed.Add(1)
		case e.Kind == core.EventRenewed:
			renewErr.Add(1)
		case e.Kind == core.EventLost:
			lost.Add(1)
		}
	})
	opts := srv.Options()
	opts.PoolSize = 32
	c := redis.NewClient(opts)
	defer c.Close()
	l := core.Must(core.New(c, core.WithTTL(time.Second), core.WithObserver(obs)))
	defer l.Close()
	ctx := locktest.Context(t)

	const n, workers = 10_000, 4
	baseline := runtime.NumGoroutine()
	leases := make([]*core.Lease, n)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += workers {
				s, err := l.TryLock(ctx, fmt.Sprintf("lease:%d", i))
				if err != nil {
					errs <- err
					return
				}
				leases[i] = s
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	held := runtime.NumGoroutine()

	time.Sleep(3 * time.Second) // the hold being tested

	during := runtime.NumGoroutine()
	for i, s := range leases {
		select {
		case <-s.Done():
			t.Fatalf("lease %d lost: %v", i, context.Cause(s.Context()))
		default:
		}
	}
	cmds := make([]*redis.IntCmd, n)
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cmds {
			cmds[i] = p.Exists(ctx, fmt.Sprintf("lockgate:{lease:%d}", i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if cmd.Val() != 1 {
			t.Fatalf("lease %d's key expired", i)
		}
	}
	t.Logf("goroutines: %d before, %d after acquiring %d leases, %d during the hold; %d renewals ok, %d failed, %d lost",
		baseline, held, n, during, renewed.Load(), renewErr.Load(), lost.Load())
	if during-baseline > 10 {
		t.Fatalf("goroutines grew by %d with %d leases", during-baseline, n)
	}
	// Each lease is renewed every TTL/3: at least 3 rounds in 3s.
	if renewed.Load() < 3*n || lost.Load() != 0 {
		t.Fatalf("%d renewals, %d lost: want ≥ %d renewals and none lost", renewed.Load(), lost.Load(), 3*n)
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += workers {
				leases[i].Unlock(ctx)
			}
		}(w)
	}
	wg.Wait()
}
