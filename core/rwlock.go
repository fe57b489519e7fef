package core

import (
	"context"
	"fmt"
	"time"
)

// RLock takes the lock named key shared with other RLock holders; Lock of
// the same name is the writer and excludes them. A waiting writer is not
// overtaken by readers that arrive after it.
//
// Budgets, options and errors are Lock's, and readers and writers wait in
// one FIFO: readers that reach the head together go in together. Each
// reader has its own Fence (from the same per-slot source as locks'), its
// own TTL and watchdog, and its loss ends only its own lease. Re-entry: in
// a ctx that holds the name (read or write) RLock re-enters that hold, as
// Lock does; Lock in a ctx that holds the name only for reading returns
// ErrInvalid at once (a read lock is not upgraded: it would wait for
// itself). Shutdown releases read locks, Close leaves them to expire. In
// Redis the readers are entries of the lock's own hash (see docs/usage.md,
// "Read-write locks"): Lock's uncontended path is unchanged.
//
// Errors: as for Lock (a *BusyError when a writer still held or waited
// ahead at the budget's end); ErrUnsupported on a Redlock Locker.
func (l *Locker) RLock(ctx context.Context, key string, opts ...LockOption) (*Lease, error) {
	start := time.Now()
	var invalid error
	if !l.be.queues() {
		invalid = fmt.Errorf("%w: RLock on a Redlock Locker (NewRedlock): use a Locker on one deployment", ErrUnsupported)
	}
	a, err := l.prepare(ctx, start, key, opts, true, time.Time{}, 0, invalid)
	if err != nil {
		return nil, err
	}
	a.keys = l.keysFor(key)
	a.keys.read = true
	if s, err := l.reenter(ctx, a, start); s != nil || err != nil {
		return s, err
	}
	return a.start(ctx, start)
}

// upgradeError is Lock's error in a ctx that holds key only for reading.
func upgradeError(key string) error {
	return invalidf("Lock of %q in a context that holds it for reading (RLock): a read lock is not upgraded: Unlock it, then Lock", key)
}
