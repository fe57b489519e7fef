package core

import (
	"context"
	"fmt"
	"time"
)

// RLock takes the lock named key shared with other RLock holders; Lock of
// the same name is the writer and excludes them. Readers and writers wait in
// one FIFO, so a waiting writer is not overtaken by later readers. Budgets
// and options are Lock's; each reader has its own Fence, TTL and watchdog.
// In a ctx that holds the name RLock re-enters that hold; Lock in a ctx that
// holds it only for reading returns ErrInvalid (no upgrade). Shutdown
// releases read locks, Close leaves them to expire. See docs/usage.md,
// "Read-write locks".
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
