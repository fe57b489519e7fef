package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Locker hands out distributed locks kept in Redis. It is safe for concurrent
// use; make one per Redis deployment and share it. Close or Shutdown stops its
// background goroutines (the watchdog, Pub/Sub, bounded calls).
type Locker struct {
	client    redis.UniversalClient
	be        backend
	opts      lockerOptions
	epoch     time.Time // origin of the monotonic clock used for validity
	wd        *watchdog
	waitRooms []*waitRoom // one per Redis deployment: one, or a Redlock's nodes
	holdTimes holdTimes
	server    serverCheck
	// markerTTL: a done marker's lifetime, longer than a client re-send takes
	markerTTL time.Duration
	// ctxDeadlines: the client bounds calls by ctx (ContextTimeoutEnabled)
	ctxDeadlines bool
	// followsFailovers: a Sentinel failover or Cluster client, so a failed
	// dial may be a failover (see failingOver)
	followsFailovers bool
	// reached: a call got an answer from the deployment once (answered)
	reached atomic.Bool

	closed   atomic.Bool
	done     chan struct{}
	stopOnce sync.Once

	bgMu     sync.Mutex
	bgClosed bool
	bg       sync.WaitGroup

	prober            *prober // asks whether the server accepts connections for a slow call
	undoWake          undoWaits
	abandonedPatterns sync.Map // patterns whose leases were abandoned, warned once
	turns             turns    // Redlock: one waiter of a lock at a time tries
	mut               mutants  // defects put back for the controls of tests (mutants.go)
}

// New returns a Locker on client: a *redis.Client, a Sentinel failover
// client or a *redis.ClusterClient. opts set every lock's defaults (WithTTL
// 30s, WithWait 2s, watchdog on, WithReleaseTimeout 1s) and the Locker's
// settings (WithPrefix "lockgate:", WithObserver, WithLogger, WithDriftFactor
// 0.01, WithFenceWindow 10m). New sends nothing and never closes client; the
// first lock checks the server (Redis 7.0 or later, else ErrUnsupported; an
// eviction policy other than noeviction is logged).
// Errors: ErrInvalid for a nil client or an invalid option, naming it.
func New(client redis.UniversalClient, opts ...Option) (*Locker, error) {
	if isNil(client) {
		return nil, invalidf("nil redis client")
	}
	o := defaultLockerOptions()
	for _, opt := range opts {
		if opt == nil {
			return nil, invalidf("nil option")
		}
		opt.applyLocker(&o)
	}
	if err := cmp.Or(o.err, o.call.err); err != nil {
		return nil, err
	}
	mut, err := parseMutants(envMutants + "," + o.mutants)
	if err != nil {
		return nil, err
	}
	if len(o.sentinels) > 0 && !isFailoverClient(client) {
		return nil, invalidf("WithSentinelAddrs: the client is not a Sentinel failover client (redis.NewFailoverClient)")
	}
	o.call.refreshScriptArgs()
	marker := markerTTL(client)
	be := &deployment{c: client, windowArg: ms(o.fenceWindow), markerArg: ms(marker), ackN: o.ackN, ackTimeout: o.ackTimeout}
	_, cluster := client.(*redis.ClusterClient)
	l := &Locker{
		client:           client,
		be:               be,
		markerTTL:        marker,
		ctxDeadlines:     honoursDeadlines(client, &mut),
		followsFailovers: cluster || isFailoverClient(client),
		opts:             o,
		epoch:            time.Now(),
		done:             make(chan struct{}),
		undoWake:         undoWaits{wake: make(chan struct{})},
		mut:              mut,
	}
	l.waitRooms = []*waitRoom{newWaitRoom(client, l.clock, &l.mut)}
	l.prober = newProber(client, l.reached.Load, o.sentinels, l.clock)
	l.wd = newWatchdog(l)
	be.mut = &l.mut
	if !o.noCoalesce && o.ackN == 0 {
		be.coalesce(l.goBackground)
	}
	return l, nil
}

// Must returns l, or panics with err: core.Must(core.New(rdb)).
func Must(l *Locker, err error) *Locker {
	if err != nil {
		panic(err)
	}
	return l
}

// Close stops the Locker's background work; calling it again is safe. Held
// leases are not released (they expire after their TTL); their contexts end
// with cause ErrClosed. Waiting or overlapping Locks return ErrClosed, holding
// nothing. Close waits for Redis calls in flight; it never closes the client.
func (l *Locker) Close() error {
	for _, h := range l.stop() {
		l.lost(h, ErrClosed)
	}
	l.stopBackground()
	return nil
}

// Shutdown is a graceful Close: it stops new locks (ErrClosed), cancels held
// leases' contexts (cause ErrClosed), releases their locks in Redis within
// ctx, then closes, waiting like Close for the calls in flight. Errors: ctx's
// error if it ended before every release was answered, or the failed
// releases joined (ErrUnavailable). No-op after Close.
func (l *Locker) Shutdown(ctx context.Context) error {
	ended := l.stop()
	errs := make([]error, len(ended))
	var wg sync.WaitGroup
	for i, h := range ended {
		h.beginRelease(false) // the watchdog has stopped: no renewal in flight
		wg.Go(func() {
			held, err := bounded(l, ctx, time.Time{}, func(cctx context.Context) (bool, error) {
				return l.be.release(cctx, &h.keys, h.owner, h.markers())
			}, nil)
			switch {
			case err == errNoAnswer:
				errs[i] = unavailable("release", ctxErr(ctx))
			case err == ErrClosed:
				errs[i] = err
			case err != nil:
				errs[i] = unavailable("release", err)
			}
			if errs[i] == nil && held {
				l.holdTimes.observe(time.Since(h.acquired))
			}
			l.released(ctx, h, false, errs[i])
		})
	}
	wg.Wait()
	l.stopBackground()
	return errors.Join(errs...)
}

// stop closes the Locker and its watchdog; the first call ends the holds
// still live (endClosed, leases cancelled with ErrClosed) and returns them.
func (l *Locker) stop() (ended []*hold) {
	l.stopOnce.Do(func() {
		l.closed.Store(true)
		close(l.done)
		for _, r := range l.waitRooms {
			r.close()
		}
		for _, h := range l.wd.close() {
			if h.end.CompareAndSwap(endLive, endClosed) {
				h.first.cancel(ErrClosed)
				ended = append(ended, h)
			}
		}
	})
	return ended
}

// goBackground runs fn on a goroutine Close waits for; false once closing.
func (l *Locker) goBackground(fn func()) bool {
	l.bgMu.Lock()
	if l.bgClosed {
		l.bgMu.Unlock()
		return false
	}
	l.bg.Add(1)
	l.bgMu.Unlock()
	go func() {
		defer l.bg.Done()
		fn()
	}()
	return true
}

func (l *Locker) stopBackground() {
	l.bgMu.Lock()
	l.bgClosed = true
	l.bgMu.Unlock()
	l.bg.Wait()
}

// Lock obtains the lock named key, waiting in Redis's FIFO queue while it is
// held, at most the wait budget (WithWait, default 2s) or until ctx ends, plus
// at most 50ms (on a ContextTimeoutEnabled client other than a ReadOnly
// Cluster client, a hung call ends at ctx's deadline, not at its
// cancellation). A ctx that is, or derives from, the Context of a lease
// holding key re-enters it: same fence, one more Unlock (a read lease is not
// upgraded: ErrInvalid). Once ctx ends without Unlock the
// lock expires within its TTL.
// Errors: a *BusyError (errors.Is ErrNotObtained) when still held at the
// budget's end; ErrUnavailable when Redis failed or did not answer in time;
// each joined with ctx's error if ctx ended first (alone if it had ended
// already); ErrInvalid; ErrUnsupported (Redis < 7.0); ErrClosed.
// See docs/usage.md, "Lock in detail".
func (l *Locker) Lock(ctx context.Context, key string, opts ...LockOption) (*Lease, error) {
	return l.lockUntil(ctx, key, opts, true, time.Time{}, false)
}

// TryLock makes one attempt to obtain (or re-enter) the lock: a *BusyError at
// once if another owner holds it. It returns within the attempt timeout
// (WithAttemptTimeout, default 500ms) or ctx's deadline, whichever is first,
// plus at most 50ms. Other errors as for Lock.
func (l *Locker) TryLock(ctx context.Context, key string, opts ...LockOption) (*Lease, error) {
	return l.lockUntil(ctx, key, opts, false, time.Time{}, false)
}

// callOptions sets o to the Locker's call options with opts applied (o.err:
// the first invalid one), in place so that no copy escapes to the heap.
func (l *Locker) callOptions(o *callOptions, opts []LockOption) {
	*o = l.opts.call
	for _, opt := range opts {
		if opt == nil {
			o.fail(invalidf("nil option"))
			continue
		}
		opt.applyLock(o)
	}
}

// lockUntil is Lock, TryLock (!wait) or RLock (read) with a budget ending by
// until (zero: none), for LockMulti.
func (l *Locker) lockUntil(ctx context.Context, key string, opts []LockOption, wait bool, until time.Time, read bool) (*Lease, error) {
	start := time.Now()
	var invalid error
	if read && !l.be.traits().queues {
		invalid = fmt.Errorf("%w: RLock on a Redlock Locker (NewRedlock): use a Locker on one deployment", ErrUnsupported)
	}
	a, err := l.prepare(ctx, start, key, opts, wait, until, 0, invalid)
	if err != nil {
		return nil, err
	}
	a.keys = l.keysFor(key)
	a.keys.read = read
	if s, err := l.reenter(ctx, a, start); s != nil || err != nil {
		return s, err
	}
	return a.start(ctx, start)
}

// prepare makes key's acquisition (permits 0 for a lock) with its options and
// deadline: the wait budget or one attempt's, ctx's or until, whichever is
// first. A bad call, a closed Locker or an ended ctx is observed and returned.
func (l *Locker) prepare(ctx context.Context, start time.Time, key string, opts []LockOption, wait bool, until time.Time, permits int, invalid error) (*acquisition, error) {
	a := &acquisition{l: l, key: key}
	o := &a.o
	l.callOptions(o, opts)
	err := cmp.Or(o.err, invalid, validateKey(key))
	if err == nil && l.closed.Load() {
		err = ErrClosed
	}
	if err == nil && ctx.Err() != nil {
		err = ctxErr(ctx)
	}
	if err != nil {
		l.observe(ctx, Event{Kind: EventNotObtained, Key: key, Pattern: o.pattern, Permits: permits, Err: err})
		return nil, err
	}
	o.refreshScriptArgs()
	if d, ok := ctx.Deadline(); ok {
		a.deadline, a.ctxEnds = d, true
	}
	budget := o.attemptTimeout // a single attempt
	if wait && o.wait > 0 {
		budget = o.wait
	}
	if d := start.Add(budget); !a.ctxEnds || d.Before(a.deadline) {
		a.deadline, a.ctxEnds = d, false
	}
	if !until.IsZero() && until.Before(a.deadline) {
		a.deadline, a.ctxEnds = until, false
	}
	a.waits = wait && o.wait > 0
	return a, nil
}

// start runs a fresh acquisition under a new owner id; tells the Observer.
func (a *acquisition) start(ctx context.Context, start time.Time) (*Lease, error) {
	a.newOwner()
	a.sentAt = a.firstSent[:0]
	s, err := a.run(ctx)
	a.l.observe(ctx, a.event(start, s, err))
	return s, err
}

// reenter re-enters a hold of a's lock in ctx's chain; nil, nil if none.
func (l *Locker) reenter(ctx context.Context, a *acquisition, start time.Time) (*Lease, error) {
	s := reentry(ctx, a.key)
	if s == nil {
		return nil, nil
	}
	h := s.h
	if h.l != l {
		// Another Locker's: the same lock only if its owner holds key here
		// (see docs/usage.md, "Lock in detail").
		k := a.keys
		k.read = h.keys.read
		_, err := bounded(l, ctx, a.deadline, func(cctx context.Context) (time.Duration, error) {
			return l.be.pttl(cctx, &k, h.owner.id)
		}, nil)
		if err == ErrNotHeld {
			return nil, nil
		}
		if err != nil {
			err = opError("acquire", err)
			l.observe(ctx, Event{Kind: EventNotObtained, Key: a.key, Pattern: a.o.pattern, Wait: time.Since(start), Err: err})
			return nil, err
		}
	}
	if h.keys.read && !a.keys.read {
		err := invalidf("Lock of %q in a context that holds it for reading (RLock): a read lock is not upgraded: Unlock it, then Lock", a.key)
		l.observe(ctx, Event{Kind: EventNotObtained, Key: a.key, Pattern: a.o.pattern, Err: err})
		return nil, err
	}
	r := h.reenter(ctx)
	if r != nil {
		l.observe(ctx, Event{Kind: EventAcquired, Key: a.key, Pattern: a.o.pattern, Read: h.keys.read, Wait: time.Since(start), Reentrant: true, Fence: r.h.fence})
	}
	return r, nil // nil: the hold ended meanwhile, a fresh acquisition
}

// callDeadline is a single call's deadline: ctx's, or the attempt timeout if earlier.
func (l *Locker) callDeadline(ctx context.Context) time.Time {
	d := time.Now().Add(l.opts.call.attemptTimeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		return cd
	}
	return d
}

// event is the Observer's event of a Lock or TryLock that went to Redis.
func (a *acquisition) event(start time.Time, s *Lease, err error) Event {
	ev := Event{Kind: EventAcquired, Key: a.key, Pattern: a.o.pattern, Permits: a.keys.permits, Read: a.keys.read, Wait: time.Since(start), Attempts: a.attempts,
		Waited: a.waited, HolderTag: a.obs.holderTag, ClockOffset: a.obs.offset, ClockSampled: a.obs.sampled}
	if err != nil {
		ev.Kind, ev.Err = EventNotObtained, err
	} else {
		ev.Reentrant, ev.Fence = s.reentrant, s.h.fence
	}
	return ev
}

// clock is the Locker's monotonic clock (ns since New); validity uses it.
func (l *Locker) clock() int64 { return int64(time.Since(l.epoch)) }

// timeAt is the time ns after the Locker's epoch (a reading of clock).
func (l *Locker) timeAt(ns int64) time.Time { return l.epoch.Add(time.Duration(ns)) }

func (l *Locker) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*l.opts.driftFactor) + DefaultDriftFloor
}

func (l *Locker) observe(ctx context.Context, e Event) {
	if l.opts.observer != nil {
		l.opts.observer.Observe(ctx, e)
	}
}

// lost tells the Observer and the log that h ended without a release.
func (l *Locker) lost(h *hold, why error) {
	held := time.Since(h.acquired)
	l.observe(context.Background(), Event{Kind: EventLost, Key: h.key, Pattern: h.pattern, Permits: h.keys.permits, Read: h.keys.read, Held: held, Fence: h.fence, Err: why})
	if why != ErrClosed && why != errAbandoned {
		l.logger().Warn("lockgate: lock lost", slog.String("pattern", h.pattern), slog.Int64("fence", h.fence),
			slog.Duration("held", held), slog.Any("reason", why))
	}
}

// warnAbandoned warns, once per pattern, that a lease's ctx ended without Unlock.
func (l *Locker) warnAbandoned(h *hold) {
	if _, seen := l.abandonedPatterns.LoadOrStore(h.pattern, true); seen {
		return
	}
	l.logger().Warn("lockgate: a lease's context ended without Unlock: its lock is no longer renewed and expires within its TTL (Unlock every lease; this is said once per pattern)",
		slog.String("pattern", h.pattern), slog.Int64("fence", h.fence), slog.Duration("held", time.Since(h.acquired)))
}

// released tells the Observer (and the log, on failure) how h's release went.
func (l *Locker) released(ctx context.Context, h *hold, retry bool, err error) {
	held := time.Since(h.acquired)
	l.observe(ctx, Event{Kind: EventReleased, Key: h.key, Pattern: h.pattern, Permits: h.keys.permits, Read: h.keys.read, Held: held, Fence: h.fence, Retry: retry, Err: err})
	if err != nil && !errors.Is(err, ErrNotHeld) {
		l.logger().Warn("lockgate: release failed; the lock expires after its TTL unless released again",
			slog.String("pattern", h.pattern), slog.Int64("fence", h.fence), slog.Any("error", err))
	}
}

func (l *Locker) logger() *slog.Logger {
	return cmp.Or(l.opts.logger, slog.Default())
}
