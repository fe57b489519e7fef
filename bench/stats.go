package bench

import (
	"context"
	"slices"
	"time"
)

// spread is a metric over repetitions: its median and its range.
type spread struct {
	Med, Min, Max float64
	N             int
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{Med: m, Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// collect maps rows to one metric each.
func collect[T any](rows []T, f func(T) float64) []float64 {
	out := make([]float64, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return out
}

func sumInts[T any](rows []T, f func(T) int64) int64 {
	var n int64
	for _, r := range rows {
		n += f(r)
	}
	return n
}

// startFor starts a run's goroutines (closes begin) and returns when d has
// passed or ctx ended, giving the run's start time.
func startFor(ctx context.Context, begin chan struct{}, d time.Duration) time.Time {
	start := time.Now()
	close(begin)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	return start
}
