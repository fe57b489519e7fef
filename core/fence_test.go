package core_test

import (
	"sync"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// Fences strictly increase across 1,000 acquisitions by different
// owners (four Lockers, eight goroutines, each acquisition a fresh owner).
// The order of acquisitions is the order of entries into the critical
// section, recorded inside it.
func TestFencesStrictlyIncrease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	lockers := make([]*core.Locker, 4)
	for i := range lockers {
		lockers[i], _ = locktest.NewLocker(t, srv)
	}
	ctx := locktest.Context(t)
	const total, workers = 1000, 8
	var mu sync.Mutex // only orders the appends; the lock is what excludes
	fences := make([]int64, 0, total)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < total/workers; i++ {
				s, err := lockers[(w+i)%len(lockers)].Lock(ctx, "fenced", core.WithWait(core.DefaultTTL))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				fences = append(fences, s.Fence())
				mu.Unlock()
				if err := s.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(fences) != total {
		t.Fatalf("%d acquisitions, want %d", len(fences), total)
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fence %d = %d not above the previous %d", i, fences[i], fences[i-1])
		}
	}
}

// The last fence is remembered for the fence window: even when the server
// clock would give a lower value (simulated by planting a fence far in the
// future), the next fence is above it.
func TestFenceAboveRememberedLast(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, c := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	const future = int64(1) << 52 // far above the clock's microseconds
	if err := c.Set(ctx, core.FenceFloorKey(l, "k"), future, 0).Err(); err != nil {
		t.Fatal(err)
	}
	s, err := l.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unlock(ctx)
	if s.Fence() != future+1 {
		t.Fatalf("fence %d, want %d", s.Fence(), future+1)
	}
	if ttl := c.PTTL(ctx, core.FenceFloorKey(l, "k")).Val(); ttl <= 0 || ttl > core.DefaultFenceWindow {
		t.Fatalf("fence key TTL %v: want the fence window", ttl)
	}
}
