package core

import (
	"context"
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
	return l.lockUntil(ctx, key, opts, true, time.Time{}, true)
}
