package core

import "sync"

// turns is a Redlock Locker's local queue of waiters, by lock: one waiter
// of a lock at a time tries, the others wait in arrival order, since
// Redlock's waiters do not queue in Redis. See docs/internals.md, "Redlock".
type turns struct {
	mu    sync.Mutex
	lines map[string][]chan struct{} // by lock: the waiters in order; the first's channel is closed
}

// wait joins the line of lock key and returns a channel closed when it is
// this caller's turn (at once if no one is ahead), and the function that
// leaves the line (passing the turn on), to call exactly once.
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
	for i, c := range line {
		if c != ch {
			continue
		}
		line = append(line[:i], line[i+1:]...)
		if i == 0 && len(line) > 0 {
			close(line[0])
		}
		break
	}
	if len(line) == 0 {
		delete(t.lines, key)
	} else {
		t.lines[key] = line
	}
}
