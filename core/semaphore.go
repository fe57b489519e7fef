package core

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Semaphore takes one of permits slots of the semaphore named key; every
// caller of that name passes the same permits. Budgets, options and FIFO
// waiting are Lock's. The lease is one permit: its own Fence, TTL and
// watchdog, and a Context that ends if that permit (not another) is lost. Semaphore
// is not re-entrant, and it and Lock of the same name are separate locks.
// Shutdown releases permits, Close leaves them to expire. See
// docs/usage.md, "Semaphores".
//
// Errors: as for Lock (a *BusyError when no permit came free within the
// budget); ErrInvalid for permits below 1, or other than the count the
// current holders passed (naming both); ErrUnsupported on a Redlock Locker.
func (l *Locker) Semaphore(ctx context.Context, key string, permits int, opts ...LockOption) (*Lease, error) {
	start := time.Now()
	var invalid error
	switch {
	case permits < 1:
		invalid = invalidf("permits %d is below 1", permits)
	case !l.be.traits().queues:
		invalid = fmt.Errorf("%w: Semaphore on a Redlock Locker (NewRedlock): use a Locker on one deployment", ErrUnsupported)
	}
	a, err := l.prepare(ctx, start, key, opts, true, time.Time{}, permits, invalid)
	if err != nil {
		return nil, err
	}
	// Keys: "<lock hash>:sem" (hash, channel), the fence floor, the queue.
	k := &a.keys
	*k = l.keysFor(key)
	h := k.names[0] + ":sem"
	k.names = [4]string{h, k.names[1], h + ":q", h + ":qt"}
	for i, n := range k.names {
		k.args[i] = n
	}
	k.permits, k.permitsArg = permits, strconv.Itoa(permits)
	return a.start(ctx, start)
}

// semaphore reports whether k are a semaphore's keys, not a lock's.
func (k *lockKeys) semaphore() bool { return k.permits > 0 }

// perOwner reports whether k's holders are hash entries (permits, readers).
func (k *lockKeys) perOwner() bool { return k.permits > 0 || k.read }

var (
	semSrc        = lua("semaphore")
	semAcquireSrc = lua("semaphore_acquire")

	semAcquireScript = newScript(withQueue(semAcquireSrc, queueSrc))
	semReleaseScript = newScript(withQueue(lua("semaphore_release"), queueSrc))
	semRenewScript   = newScript(lua("semaphore_renew"))
	semPTTLScript    = newScript(lua("semaphore_pttl"))
)

// permitsError refuses a Semaphore whose holders passed another permits
// count. It matches ErrInvalid.
type permitsError struct {
	want int   // the caller's
	have int64 // the holders'
}

func (e *permitsError) Error() string {
	return fmt.Sprintf("%v: permits %d, but the holders or waiters of this semaphore passed permits %d", ErrInvalid, e.want, e.have)
}

func (e *permitsError) Is(target error) bool { return target == ErrInvalid }

func isPermits(err error) bool {
	_, ok := err.(*permitsError)
	return ok
}
