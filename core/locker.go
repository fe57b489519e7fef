package core

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Locker hands out distributed locks kept in Redis. It is safe for
// concurrent use; make one per Redis deployment and share it. Once it holds
// a lease it runs three background goroutines (the watchdog), and once a
// caller waits, one Pub/Sub connection; Close stops them.
type Locker struct {
	client redis.UniversalClient
	be     backend
	opts   options
	epoch  time.Time // origin of the monotonic clock used for validity
	idArg  any       // this Locker's random id, claimed as the next turn by its waiters
	wd     *watchdog
	room   *waitRoom

	closed    atomic.Bool
	done      chan struct{}
	closeOnce sync.Once
}

// New returns a Locker on client: a *redis.Client, a Sentinel failover
// client (redis.NewFailoverClient) or a *redis.ClusterClient. opts set the
// defaults of every lock (WithTTL 30s, WithWait 2s, WithRetry
// ExponentialBackoff(50ms, 1s), watchdog on) and the Locker-only settings
// (WithPrefix "lockgate:", WithObserver, WithDriftFactor 0.01,
// WithFenceWindow 10m). An invalid option is not reported here but by every
// Lock and TryLock, as an ErrInvalid error. The client is never closed by
// the Locker.
func New(client redis.UniversalClient, opts ...Option) *Locker {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	o.lockerOnly = ""
	o.box()
	l := &Locker{
		client: client,
		be:     single{c: client},
		opts:   o,
		epoch:  time.Now(),
		idArg:  rand.Text(),
		room:   newWaitRoom(client),
		done:   make(chan struct{}),
	}
	l.wd = newWatchdog(l)
	return l
}

// Close stops the Locker's background work and is safe to call more than
// once. Leases still held are not released in Redis (they expire after their
// TTL); their contexts are cancelled with cause ErrClosed, and waiting Lock
// calls return ErrClosed. It never closes the client given to New.
func (l *Locker) Close() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		close(l.done)
		l.room.close()
		l.wd.close()
	})
	return nil
}

// Lock obtains the lock named key, waiting while another owner holds it for
// at most the wait budget (WithWait, default 2s) or until ctx ends, whichever
// is first. Waiting does not poll: the waiter is woken by the holder's
// release (Pub/Sub), with the retry strategy and the holder's remaining TTL
// as a fallback. Waiters of one Locker for one key queue in FIFO order.
//
// If ctx carries an owner (it is, or derives from, a Lease's Context) that
// already holds key, Lock re-enters at once: same fence, one more hold to
// undo with Unlock. Otherwise the lock is taken for ctx's owner, or for a
// fresh one when ctx carries none.
//
// Errors: a *BusyError (errors.Is ErrNotObtained; RetryAfter gives the
// holder's remaining TTL) when still busy at the end of the wait budget;
// ErrNotObtained joined with ctx.Err() when ctx ends first; an
// ErrUnavailable error when Redis cannot be reached or fails; ErrInvalid for
// bad arguments (nothing is sent); ErrClosed after Close.
func (l *Locker) Lock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return l.lock(ctx, key, opts, true)
}

// TryLock makes exactly one attempt to obtain (or re-enter) the lock and
// returns a *BusyError at once if another owner holds it. Other errors as
// for Lock.
func (l *Locker) TryLock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	return l.lock(ctx, key, opts, false)
}

func (l *Locker) callOptions(opts []Option) (options, error) {
	o := l.opts
	for _, opt := range opts {
		opt(&o)
	}
	if o.err != nil {
		return o, o.err
	}
	if o.lockerOnly != "" {
		return o, invalidf("%s applies to New only", o.lockerOnly)
	}
	o.box()
	return o, nil
}

func (l *Locker) lock(ctx context.Context, key string, opts []Option, wait bool) (*Lease, error) {
	o, err := l.callOptions(opts)
	if err == nil {
		err = validateKey(key)
	}
	if err != nil {
		return nil, err
	}
	if l.closed.Load() {
		return nil, ErrClosed
	}
	start := time.Now()
	a := &acquisition{l: l, key: key, o: &o, tag: ownerFrom(ctx)}
	a.keys = l.keysFor(key)
	if a.tag != nil {
		a.owner = a.tag.id
	} else {
		a.owner = newOwnerID()
	}
	if wait && o.wait > 0 {
		a.deadline = start.Add(o.wait)
		if d, ok := ctx.Deadline(); ok && d.Before(a.deadline) {
			a.deadline = d
		}
	}
	s, err := a.run(ctx)
	ev := Event{Kind: EventAcquired, Key: key, Wait: time.Since(start), Attempts: a.attempts}
	if err != nil {
		ev.Kind, ev.Err = EventNotObtained, err
	} else {
		ev.Reentrant, ev.Fence = s.reentrant, s.fence
	}
	l.observe(ctx, ev)
	return s, err
}

// acquisition is one Lock or TryLock call.
type acquisition struct {
	l        *Locker
	key      string
	keys     lockKeys // addressed by the lease: no copy
	o        *options
	tag      *ownerTag
	owner    string
	deadline time.Time // zero: one attempt only
	attempts int
	holder   time.Duration // holder's remaining TTL at the last failed attempt
}

func (a *acquisition) busy() error {
	return &BusyError{Key: a.key, RetryAfter: a.holder}
}

func (a *acquisition) run(ctx context.Context) (*Lease, error) {
	l := a.l
	// Go straight to Redis unless callers of this Locker already queue for
	// the key (then queue behind them, FIFO). A context with an owner always
	// tries first: it may be re-entering, and must not queue behind waiters
	// that wait for it.
	if a.deadline.IsZero() || a.tag != nil || l.room.idle(a.keys.hash()) {
		s, err := a.attempt(ctx)
		if s != nil || err != nil {
			return s, err
		}
		if a.deadline.IsZero() || !time.Now().Before(a.deadline) {
			return nil, a.busy()
		}
	}
	w := l.room.join(a.keys.hash())
	if w == nil {
		return nil, ErrClosed
	}
	obtained := false
	defer func() { l.room.leave(w, obtained) }()

	retry := a.o.retry()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		remaining := time.Until(a.deadline)
		if remaining <= 0 {
			return nil, a.busy()
		}
		head := l.room.isHead(w)
		sleep := remaining
		if head {
			if b := retry.NextBackoff(); b > 0 {
				sleep = min(sleep, b)
			}
			if a.holder > 0 {
				sleep = min(sleep, a.holder+time.Millisecond)
			}
		}
		timer.Reset(sleep)
		select {
		case <-ctx.Done():
			return nil, errors.Join(a.busy(), ctx.Err())
		case <-l.done:
			return nil, ErrClosed
		case <-w.wake:
		case <-w.promoted:
			continue // now the head: re-arm the timer with the backoff
		case <-timer.C:
			if !head {
				continue
			}
		}
		if !l.room.isHead(w) {
			continue
		}
		s, err := a.attempt(ctx)
		if s != nil {
			obtained = true
		}
		if s != nil || err != nil {
			return s, err
		}
	}
}

// attempt sends the acquire script once. It returns a lease, or nil and nil
// when the lock is busy (a.holder updated), or an error.
func (a *acquisition) attempt(ctx context.Context) (*Lease, error) {
	l, o := a.l, a.o
	a.attempts++
	sent := l.mono()
	reserve := noReserve
	if !a.deadline.IsZero() {
		reserve = l.idArg
	}
	fence, reentered, holder, err := l.be.acquire(ctx, &a.keys, a.owner, o.ttlArg, o.windowArg, reserve)
	if err != nil {
		if ctx.Err() != nil {
			a.abandon(ctx)
			return nil, errors.Join(a.busy(), ctx.Err())
		}
		return nil, unavailable("acquire", err)
	}
	if fence == 0 {
		a.holder = holder
		return nil, nil
	}
	validUntil := sent + int64(o.ttl-l.drift(o.ttl))
	if l.mono() >= validUntil {
		// The reply came too late to leave any validity: give it back.
		a.abandon(ctx)
		return nil, unavailable("acquire", errors.New("reply arrived after the lease's validity"))
	}
	s := &Lease{
		l:         l,
		key:       a.key,
		keys:      &a.keys,
		windowArg: o.windowArg,
		fence:     fence,
		reentrant: reentered,
		watchdog:  o.watchdog,
		acquired:  time.Now(),
		renewAt:   sent + int64(o.ttl/3),
		hidx:      -1,
	}
	s.owner = &ownerTag{id: a.owner, lease: s}
	s.ownerArg = a.owner
	s.ttl.Store(int64(o.ttl))
	s.validUntil.Store(validUntil)
	inner, cancel := context.WithCancelCause(ctx)
	s.ctx, s.cancel = &leaseCtx{Context: inner, lease: s}, cancel
	l.wd.add(s)
	return s, nil
}

// abandon releases a lock that an attempt may have obtained without the
// caller learning it (ctx ended mid-call, or the reply came too late). Only
// a fresh owner is released: a context owner may hold it from before.
func (a *acquisition) abandon(ctx context.Context) {
	if a.tag != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(a.o.ttl, time.Second))
	defer cancel()
	_, _ = a.l.be.release(ctx, &a.keys, a.owner, a.o.windowArg)
}

var noReserve any = ""

func (l *Locker) mono() int64 { return int64(time.Since(l.epoch)) }

func (l *Locker) monoTime(ns int64) time.Time { return l.epoch.Add(time.Duration(ns)) }

func (l *Locker) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*l.opts.driftFactor) + DefaultDriftFloor
}

func (l *Locker) observe(ctx context.Context, e Event) {
	if l.opts.observer != nil {
		l.opts.observer.Observe(ctx, e)
	}
}
