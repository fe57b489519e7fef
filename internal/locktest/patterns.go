package locktest

import (
	"context"
	"sync"

	"github.com/lockgate/lockgate/core"
)

// Patterns is a core.Observer that records every event's pattern and key,
// for the adapters' tests that their locks are named by their template.
type Patterns struct {
	mu   sync.Mutex
	seen []core.Event
}

// Observe records e.
func (p *Patterns) Observe(_ context.Context, e core.Event) {
	p.mu.Lock()
	p.seen = append(p.seen, e)
	p.mu.Unlock()
}

// Check returns "" when at least one event was seen and every event of a
// key that starts with keyPrefix names pattern; else what is wrong.
func (p *Patterns) Check(keyPrefix, pattern string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.seen {
		if len(e.Key) < len(keyPrefix) || e.Key[:len(keyPrefix)] != keyPrefix {
			continue
		}
		n++
		if e.Pattern != pattern {
			return e.Kind.String() + " event of key " + e.Key + " names pattern " + e.Pattern + ", want " + pattern
		}
	}
	if n == 0 {
		return "no event of a key starting with " + keyPrefix + " was observed"
	}
	return ""
}
