package core

import (
	"slices"
	"sync"
)

// turns lets one Redlock waiter of a lock at a time try, in arrival order
// (they do not queue in Redis). See docs/internals.md, "Redlock (`redlock.go`, `turns.go`)".
type turns struct {
	mu    sync.Mutex
	lines map[string][]chan struct{} // by lock: the waiters in order; the first's channel is closed
}

// wait joins key's line. It returns a channel closed at the caller's turn
// and a leave function (passes the turn on) to call exactly once.
func (t *turns) wait(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	t.mu.Lock()
	if t.lines == nil {
		t.lines = map[string][]chan struct{}{}
	}
	line := append(t.lines[key], ch)
	t.lines[key] = line
	if len(line) == 1 {
		close(ch)
	}
	t.mu.Unlock()
	return ch, func() { t.leave(key, ch) }
}

func (t *turns) leave(key string, ch chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	line := t.lines[key]
	if i := slices.Index(line, ch); i >= 0 {
		line = slices.Delete(line, i, i+1)
		if i == 0 && len(line) > 0 {
			close(line[0]) // the next one's turn
		}
	}
	if len(line) == 0 {
		delete(t.lines, key)
	} else {
		t.lines[key] = line
	}
}
