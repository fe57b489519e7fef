package core

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Semaphore takes one of permits slots of the semaphore named key (every
// caller of that name passes the same permits), waiting as Lock does; the
// lease is one permit: its own Fence, a Context that ends if the permit is
// lost, Unlock, Extend, the watchdog.
//
// Budgets, options, FIFO waiting and handoff are Lock's. Each permit
// expires on its own (a dead holder's comes back after its TTL), and its
// loss ends only its own lease. Fences come from the same per-slot source
// as locks'. Semaphore is not re-entrant, and it and Lock of the same name
// never exclude or re-enter each other. Shutdown releases permits, Close
// leaves them to expire. In Redis: a hash "<prefix>{<name>}:sem" of
// holders (each "<expiry ms>|<fence>") and the count, and its queue, in
// the name's slot: the hash is gone once nobody holds or waits, the
// queue's keys expire after their longest-lived entry. See docs/usage.md,
// "Semaphores".
//
// Errors: as for Lock (a *BusyError when no permit came free within the
// budget); ErrInvalid for permits below 1, or other than the count the
// current holders passed (naming both); ErrUnsupported on a Redlock Locker,
// whose nodes could each grant a different last permit.
func (l *Locker) Semaphore(ctx context.Context, key string, permits int, opts ...LockOption) (*Lease, error) {
	start := time.Now()
	var invalid error
	switch {
	case permits < 1:
		invalid = invalidf("permits %d is below 1", permits)
	case !l.be.queues():
		invalid = fmt.Errorf("%w: Semaphore on a Redlock Locker (NewRedlock): use a Locker on one deployment", ErrUnsupported)
	}
	a, err := l.prepare(ctx, start, key, opts, true, time.Time{}, permits, invalid)
	if err != nil {
		return nil, err
	}
	a.keys = l.semKeysFor(key, permits)
	return a.start(ctx, start)
}

// semKeysFor returns the keys of the semaphore name with permits: the
// holders' hash (also its channel, "<lock's hash key>:sem"), the slot's
// fence floor, and its queue.
func (l *Locker) semKeysFor(name string, permits int) lockKeys {
	k := l.keysFor(name)
	h := k.names[0] + ":sem"
	k.names = [4]string{h, k.names[1], h + ":q", h + ":qt"}
	for i, n := range k.names {
		k.args[i] = n
	}
	k.permits, k.permitsArg = permits, strconv.Itoa(permits)
	return k
}

// semaphore reports whether k are a semaphore's keys (semKeysFor), not a
// lock's.
func (k *lockKeys) semaphore() bool { return k.permits > 0 }

// perOwner reports whether k's holders are each an entry of their hash
// (owner → "<expiry ms>|<fence>[|<tag>]", a semaphore's permits or a lock's
// readers), not the lock hash's one owner.
func (k *lockKeys) perOwner() bool { return k.permits > 0 || k.read }

var (
	semSrc        = lua("semaphore")
	semAcquireSrc = lua("semaphore_acquire")
	semReleaseSrc = lua("semaphore_release")
	semRenewSrc   = lua("semaphore_renew")
	semPTTLSrc    = lua("semaphore_pttl")

	semAcquireScript = newScript(withQueue(semAcquireSrc, queueSrc))
	semReleaseScript = newScript(withQueue(semReleaseSrc, queueSrc))
	semRenewScript   = newScript(semRenewSrc)
	semPTTLScript    = newScript(semPTTLSrc)
)

// otherPermits reads a semaphore acquire's refusal of a permits count
// other than its holders' or waiters' ({"p", n}): n and true.
func otherPermits(cmd *redis.Cmd) (int64, bool) {
	p, ok := cmd.Val().([]any)
	if !ok || len(p) != 2 || p[0] != "p" {
		return 0, false
	}
	have, _ := p[1].(int64)
	return have, true
}

// permitsError is a Semaphore refused because its holders passed another
// permits count. It matches ErrInvalid.
type permitsError struct {
	want int   // the caller's
	have int64 // the holders'
}

func (e *permitsError) Error() string {
	return fmt.Sprintf("%v: permits %d, but the holders or waiters of this semaphore passed permits %d", ErrInvalid, e.want, e.have)
}

func (e *permitsError) Is(target error) bool { return target == ErrInvalid }

// isPermits reports whether err is a permitsError.
func isPermits(err error) bool {
	_, ok := err.(*permitsError)
	return ok
}
