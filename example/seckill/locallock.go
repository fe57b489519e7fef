package seckill

import (
	"context"
	"sync"
)

// LocalLocks is a single-node lock: one in-process mutex per key.
// It serialises requests that reach the same process and nothing else, so
// behind a load balancer with several nodes one user can still place
// several orders. The zero value is ready to use; entries are removed when
// no one holds or waits for them.
type LocalLocks struct {
	mu    sync.Mutex
	locks map[string]*localLock
}

type localLock struct {
	ch   chan struct{} // a 1-slot semaphore: waiting on it honours ctx
	refs int
}

// Lock waits for key's mutex or for ctx to end; it returns the unlock
// function, or ctx's error (nothing held).
func (l *LocalLocks) Lock(ctx context.Context, key string) (func(), error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = make(map[string]*localLock)
	}
	e := l.locks[key]
	if e == nil {
		e = &localLock{ch: make(chan struct{}, 1)}
		l.locks[key] = e
	}
	e.refs++
	l.mu.Unlock()

	select {
	case e.ch <- struct{}{}:
		return func() { <-e.ch; l.release(key, e) }, nil
	case <-ctx.Done():
		l.release(key, e)
		return nil, ctx.Err()
	}
}

func (l *LocalLocks) release(key string, e *localLock) {
	l.mu.Lock()
	e.refs--
	if e.refs == 0 {
		delete(l.locks, key)
	}
	l.mu.Unlock()
}

// Len returns the number of keys held or waited for (for tests).
func (l *LocalLocks) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.locks)
}
