// Package locktest holds test helpers shared by the adapters' tests.
package locktest

import (
	"sync"
	"sync/atomic"
)

// Gauge records how many handlers are inside a critical section at once.
// Handlers call Enter and Exit; tests read Max and Ran, and a handler can
// end its work early on Overlap, so a control that overlaps finishes fast
// while one that never overlaps works for its full time.
type Gauge struct {
	in, max, ran atomic.Int32
	once         sync.Once
	overlap      chan struct{}
}

// NewGauge returns an empty Gauge.
func NewGauge() *Gauge { return &Gauge{overlap: make(chan struct{})} }

// Enter counts a handler in.
func (g *Gauge) Enter() {
	g.ran.Add(1)
	n := g.in.Add(1)
	for {
		m := g.max.Load()
		if n <= m || g.max.CompareAndSwap(m, n) {
			break
		}
	}
	if n >= 2 {
		g.once.Do(func() { close(g.overlap) })
	}
}

// Exit counts a handler out.
func (g *Gauge) Exit() { g.in.Add(-1) }

// Max is the most handlers seen inside at once.
func (g *Gauge) Max() int32 { return g.max.Load() }

// Ran is how many times a handler entered.
func (g *Gauge) Ran() int32 { return g.ran.Load() }

// Overlap is closed the first time two handlers are inside at once.
func (g *Gauge) Overlap() <-chan struct{} { return g.overlap }
