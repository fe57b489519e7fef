package core_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

const (
	exclNodes      = 3
	exclGoroutines = 32
	exclTotal      = 3000
)

// incrementAll runs exclTotal non-atomic increments (GET, then SET) of one
// counter in Redis from exclGoroutines goroutines spread over three "nodes"
// (each with its own client), each increment inside lock (nil: no lock).
func incrementAll(t *testing.T, srv *redistest.Server, lock func(node int, ctx context.Context) (func(), error)) int {
	t.Helper()
	ctx := locktest.Context(t)
	clients := make([]*redis.Client, exclNodes)
	for i := range clients {
		clients[i] = srv.Client(t)
	}
	errs := make(chan error, exclGoroutines)
	var wg sync.WaitGroup
	for g := 0; g < exclGoroutines; g++ {
		n := exclTotal / exclGoroutines
		if g < exclTotal%exclGoroutines {
			n++
		}
		wg.Add(1)
		go func(g, n int) {
			defer wg.Done()
			c := clients[g%exclNodes]
			for i := 0; i < n; i++ {
				unlock := func() {}
				if lock != nil {
					u, err := lock(g%exclNodes, ctx)
					if err != nil {
						errs <- err
						return
					}
					unlock = u
				}
				v, err := c.Get(ctx, "counter").Int()
				if err != nil && err != redis.Nil {
					errs <- err
					return
				}
				if err := c.Set(ctx, "counter", strconv.Itoa(v+1), 0).Err(); err != nil {
					errs <- err
					return
				}
				unlock()
			}
		}(g, n)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	v, err := clients[0].Get(ctx, "counter").Int()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Three Lockers (nodes) keep a non-atomic read-modify-write exact.
func TestMutualExclusionAcrossNodes(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	lockers := make([]*core.Locker, exclNodes)
	for i := range lockers {
		lockers[i], _ = locktest.NewLocker(t, srv, core.WithWait(20_000_000_000)) // 20s budget: nobody should give up
	}
	got := incrementAll(t, srv, func(node int, ctx context.Context) (func(), error) {
		s, err := lockers[node].Lock(ctx, "counter-lock")
		if err != nil {
			return nil, err
		}
		return func() {
			if err := s.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}, nil
	})
	if got != exclTotal {
		t.Fatalf("counter = %d with the lock, want %d", got, exclTotal)
	}
}

// Control for TestMutualExclusionAcrossNodes: the same workload without the
// lock loses updates, so the exact total above is evidence, not luck.
func TestMutualExclusionControlWithoutLock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	got := incrementAll(t, srv, nil)
	if got >= exclTotal {
		t.Fatalf("counter = %d without a lock: expected lost updates (< %d)", got, exclTotal)
	}
	t.Logf("without the lock: %d of %d increments survived", got, exclTotal)
}
