package rig

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
)

// Lock implementations a worker can use. Only lockgate is expected to pass;
// the others are the checker's controls.
const (
	LockGate      = "lockgate"  // core.Locker, the holder checks its lease context before each write
	LockNaive     = "naive"     // a naive SET NX lock with a fixed expiry: SET NX PX + DEL, no owner check, no renewal, no fence
	LockIgnoreCtx = "ignorectx" // core.Locker, but the holder ignores its lease context and writes on
	LockLoopMulti = "loopmulti" // core.Locker, but a multi request is a loop of Locks in the order drawn that keeps what it took when a later one fails (multi.go)
	LockNaiveSem  = "naivesem"  // core.Locker for locks, but a semaphore is a counter: INCR/DECR, an expiry set once, no holder's own entry, no renewal (sem.go)
	LockNaiveRW   = "naiverw"   // core.Locker, but a read-write lock's readers take another name's read lock: no writer excludes them (rw.go)
)

// WorkerConfig is one worker process.
type WorkerConfig struct {
	Name        string // w<i>.<generation>
	Redis       string // host:port, or the sentinels', Redlock's masters' or Cluster nodes' addresses, comma-separated
	MasterName  string // Sentinel master name; empty for a plain server
	Cluster     bool   // Redis names Cluster nodes
	Redlock     bool   // Redis names Redlock's masters
	Routes      string // "addr=proxy,...": connections to addr go through proxy (this worker's own)
	Resource    string
	Keys        int
	Hot         int // the first Hot keys take 70% of the requests
	Seed        uint64
	Lock        string
	TTL         time.Duration   // 0: a mix from 50ms to 60s, per call
	TTLs        []time.Duration // when set, each call's TTL is one of them (uniformly)
	Wait        time.Duration   // 0: a mix from NoWait to 10s, per call
	Waits       []time.Duration // when set, each call's wait is one of them (uniformly; with TTLs of the same length, the one paired with its TTL)
	TryLock     bool            // a lone worker only ever TryLocks
	Hold        time.Duration   // when set, how long a lone worker's holds last
	CrowdTTL    time.Duration   // when set, the crowd's lease time (instead of TTL/TTLs)
	Pace        time.Duration   // when set, a lone worker waits 0.5–1.5 times it after each request
	ReadTimeout time.Duration
	CtxTimeout  bool // the client's ContextTimeoutEnabled
	Crowd       int  // > 0: this many goroutines wait on the hot keys at once (the crowd)
	Multi       int  // percent of a lone worker's requests that take 2–3 keys at once (LockMulti, multi.go)
	Sem         int  // percent of the requests (the crowd's too) that take a permit of the semaphore of the drawn name (Locker.Semaphore, sem.go)
	Permits     int  // the semaphores' permits
	RW          int  // percent of the requests (the crowd's too) that take the drawn name's read-write lock, as a reader (RLock) 3 times in 4, else a writer (rw.go)
	Log         string
}

// worker is a process: one client and Locker, and its actors (one, or a
// crowd's goroutines), each making one call at a time.
type worker struct {
	cfg    WorkerConfig
	log    *jsonLog
	client redis.UniversalClient
	nodes  []redis.UniversalClient // Redlock's masters (client is the first)
	mu     sync.Mutex              // guards locker (a holder may replace it)
	locker *core.Locker
}

// actor is one sequence of calls: the worker's, or a crowd goroutine's.
type actor struct {
	w     *worker
	name  string
	rng   *rand.Rand
	res   *resourceClient
	holds atomic.Int64
}

// WorkerMain is the worker process: it parses the flags Run gives it and
// runs the workload until ctx ends (the controller's SIGTERM).
func WorkerMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var cfg WorkerConfig
	var seed int64
	fs.StringVar(&cfg.Name, "name", "w0.0", "worker name")
	fs.StringVar(&cfg.Log, "log", "", "log file")
	fs.StringVar(&cfg.Redis, "redis", "", "Redis address(es)")
	fs.StringVar(&cfg.MasterName, "master", "", "Sentinel master name")
	fs.BoolVar(&cfg.Cluster, "cluster", false, "-redis names Cluster nodes")
	fs.BoolVar(&cfg.Redlock, "redlock", false, "-redis names Redlock's masters, comma-separated")
	fs.StringVar(&cfg.Routes, "routes", "", "addr=proxy,...: dial addr through proxy")
	fs.StringVar(&cfg.Resource, "resource", "", "resource address")
	fs.IntVar(&cfg.Keys, "keys", 3, "keys")
	fs.IntVar(&cfg.Hot, "hot", 0, "hot keys (70% of the requests)")
	fs.Int64Var(&seed, "seed", 1, "seed")
	fs.StringVar(&cfg.Lock, "lock", LockGate, "lock implementation")
	fs.DurationVar(&cfg.TTL, "ttl", 0, "lease time (0: mixed)")
	fs.DurationVar(&cfg.Wait, "wait", 0, "wait budget (0: mixed)")
	fs.DurationVar(&cfg.Hold, "hold", 0, "how long a lone worker's holds last (0: mostly a few ms)")
	ttls := fs.String("ttls", "", "comma-separated lease times to draw each call's from (overrides the mix)")
	waits := fs.String("waits", "", "comma-separated wait budgets to draw each call's from (overrides the mix)")
	fs.BoolVar(&cfg.TryLock, "trylock", false, "a lone worker only TryLocks")
	fs.DurationVar(&cfg.CrowdTTL, "crowd-ttl", 0, "the crowd's lease time (0: as -ttl/-ttls)")
	fs.DurationVar(&cfg.Pace, "pace", 0, "a lone worker's wait after each request (0: 0-2ms)")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", 300*time.Millisecond, "go-redis read timeout")
	fs.BoolVar(&cfg.CtxTimeout, "ctx-timeout", false, "go-redis ContextTimeoutEnabled")
	fs.IntVar(&cfg.Crowd, "crowd", 0, "goroutines waiting at once (0: one actor)")
	fs.IntVar(&cfg.Multi, "multi", 0, "percent of a lone worker's requests that take 2-3 keys at once")
	fs.IntVar(&cfg.Sem, "sem", 0, "percent of the requests that take a permit of a semaphore (not on Redlock)")
	fs.IntVar(&cfg.Permits, "permits", DefaultPermits, "the semaphores' permits")
	fs.IntVar(&cfg.RW, "rw", 0, "percent of the requests that take a read-write lock, 3 in 4 as readers (not on Redlock)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Seed = uint64(seed)
	var err error
	if cfg.TTLs, err = ParseDurations(*ttls); err != nil {
		return fmt.Errorf("-ttls: %w", err)
	}
	if cfg.Waits, err = ParseDurations(*waits); err != nil {
		return fmt.Errorf("-waits: %w", err)
	}
	return RunWorker(ctx, cfg)
}

// RunWorker runs the workload until ctx ends, then releases what it holds
// and returns.
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	lg, err := createLog(cfg.Log)
	if err != nil {
		return err
	}
	defer lg.close()
	w := &worker{cfg: cfg, log: lg}
	dial := routed(cfg.Routes)
	addrs := strings.Split(cfg.Redis, ",")
	switch {
	case cfg.MasterName != "":
		w.client = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: cfg.MasterName, SentinelAddrs: addrs, Dialer: dial,
			ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.ReadTimeout, DialTimeout: time.Second,
			ContextTimeoutEnabled: cfg.CtxTimeout, PoolSize: 4,
		})
	case cfg.Cluster:
		w.client = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: addrs, Dialer: dial,
			ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.ReadTimeout, DialTimeout: time.Second,
			ContextTimeoutEnabled: cfg.CtxTimeout, PoolSize: 4,
		})
	default:
		for _, addr := range addrs {
			w.nodes = append(w.nodes, redis.NewClient(&redis.Options{
				Addr: addr, Dialer: dial,
				ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.ReadTimeout, DialTimeout: time.Second,
				ContextTimeoutEnabled: cfg.CtxTimeout, PoolSize: 4,
			}))
		}
		w.client = w.nodes[0]
	}
	defer func() {
		for _, c := range w.nodes {
			c.Close()
		}
		if w.nodes == nil {
			w.client.Close()
		}
	}()
	if err := w.newLocker(); err != nil {
		return err
	}
	n := max(cfg.Crowd, 1)
	var wg sync.WaitGroup
	wg.Go(func() { w.watchStalls(ctx) })
	for j := range n {
		a := &actor{w: w, name: cfg.Name, rng: rand.New(rand.NewPCG(cfg.Seed, 0x70727475+uint64(j))), res: &resourceClient{addr: cfg.Resource}}
		if cfg.Crowd > 0 {
			a.name = fmt.Sprintf("%s/g%d", cfg.Name, j)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				a.step(ctx)
				think := time.Duration(a.rng.IntN(3)) * time.Millisecond // between requests
				if cfg.Pace > 0 && cfg.Crowd == 0 {
					think = cfg.Pace/2 + time.Duration(a.rng.Int64N(int64(cfg.Pace)))
				}
				sleep(ctx, think)
			}
		}()
	}
	wg.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.lockerNow().Shutdown(sctx)
	return nil
}

// stallAfter is the longest gap between ticks (10ms apart) of a running
// worker that is not a stall.
const stallAfter = 100 * time.Millisecond

// watchStalls logs each stretch in which this process did not run (a
// machine with more work than cores, a long collection): ticks 10ms apart
// that came more than stallAfter apart, as a "stall" event of the process.
// The checker does not count a stall's time against a call's budget, as
// it does not count a paused worker's.
func (w *worker) watchStalls(ctx context.Context) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	last := now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := now()
		if time.Duration(n-last) > stallAfter {
			w.log.add(Event{Ev: "stall", Worker: w.cfg.Name, Start: last, End: n}, true)
		}
		last = n
	}
}

// callKey is the context key under which a call's context carries its
// name, for the observer's "queued" event.
type callKey struct{}

func (w *worker) newLocker() error {
	obs := core.ObserverFunc(func(ctx context.Context, e core.Event) {
		if e.Kind == core.EventRenewed && e.Err == nil {
			w.log.add(Event{Ev: "renewed", Worker: w.cfg.Name, Key: e.Key, Fence: e.Fence, Start: now()}, true)
			return
		}
		if e.Kind != core.EventWaiting {
			return
		}
		if c, ok := ctx.Value(callKey{}).(*Event); ok {
			w.log.add(Event{Ev: "queued", Worker: c.Worker, Key: c.Key, Holder: c.Holder, Start: now()}, true)
		}
	})
	opts := []core.Option{core.WithObserver(obs)}
	if w.cfg.TTL > 0 {
		opts = append(opts, core.WithTTL(w.cfg.TTL))
	}
	var l *core.Locker
	var err error
	if w.cfg.Redlock {
		l, err = core.NewRedlock(w.nodes, opts...)
	} else {
		l, err = core.New(w.client, opts...)
	}
	if err == nil {
		w.mu.Lock()
		w.locker = l
		w.mu.Unlock()
	}
	return err
}

func (w *worker) lockerNow() *core.Locker {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.locker
}

// step is one request: lock a key (waiting, trying once, or giving up
// early), and hold it for a while.
func (a *actor) step(stop context.Context) {
	w, rng := a.w, a.rng
	key, hot := a.drawKey()
	ttl, wait := w.cfg.TTL, w.cfg.Wait
	pair := -1
	if len(w.cfg.TTLs) > 0 {
		pair = rng.IntN(len(w.cfg.TTLs))
		ttl = w.cfg.TTLs[pair]
	}
	if w.cfg.Crowd > 0 && w.cfg.CrowdTTL > 0 {
		ttl = w.cfg.CrowdTTL
	}
	if ttl == 0 {
		ttl = pick(rng, coldTTLs, coldTTLWt)
		if hot {
			ttl = pick(rng, hotTTLs, hotTTLWt)
		}
		if w.cfg.Redlock {
			ttl = min(ttl, RedlockMaxTTL)
		}
	}
	switch {
	case len(w.cfg.Waits) > 0 && len(w.cfg.Waits) == len(w.cfg.TTLs):
		wait = w.cfg.Waits[pair] // a short lease with a short patience, a long with a long
	case len(w.cfg.Waits) > 0:
		wait = w.cfg.Waits[rng.IntN(len(w.cfg.Waits))]
	}
	if wait == 0 {
		wait = pick(rng, waits, waitWt)
		if w.cfg.Crowd > 0 {
			wait = pick(rng, crowdWaits, crowdWt)
		}
	}
	// The request: its deadline bounds the whole handler, and so the
	// lease's context too.
	deadline := max(wait, 0) + 2*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	var op string
	var budget time.Duration
	switch r := rng.Float64(); {
	case w.cfg.TryLock && w.cfg.Crowd == 0:
		op, budget = "trylock", deadline
	case r < 0.70 || w.cfg.Crowd > 0:
		op, budget = "lock", wait
		if wait <= 0 {
			budget = deadline // one attempt: the request's deadline bounds it
		}
	case r < 0.85:
		op, budget = "trylock", deadline
	default:
		// A caller that gives up: its context ends while it waits. (The
		// budget stays the wait: a call in flight to Redis is waited for.)
		op, budget = "cancel", wait
		if wait <= 0 {
			budget = deadline
		}
		var c context.CancelFunc
		ctx, c = context.WithCancel(ctx)
		t := time.AfterFunc(time.Duration(5+rng.IntN(45))*time.Millisecond, c)
		parent := cancel
		cancel = func() { t.Stop(); c(); parent() }
	}
	defer cancel()
	ctxEnds := deadline // the latest the request's context ends, from now
	if op == "cancel" {
		ctxEnds = 50 * time.Millisecond
	}
	holder := fmt.Sprintf("%s#%d", a.name, a.holds.Add(1))
	if w.cfg.Lock == LockNaive {
		a.naiveStep(ctx, stop, key, holder, op, budget, ttl)
		return
	}
	if w.cfg.Sem > 0 && !w.cfg.Redlock && rng.IntN(100) < w.cfg.Sem {
		a.semStep(ctx, stop, key, holder, op, budget, ttl, wait, ctxEnds)
		return
	}
	if w.cfg.RW > 0 && !w.cfg.Redlock && rng.IntN(100) < w.cfg.RW {
		a.rwStep(ctx, stop, key, holder, op, budget, ttl, wait, ctxEnds)
		return
	}
	if w.cfg.Multi > 0 && w.cfg.Crowd == 0 && w.cfg.Keys >= 2 && rng.IntN(100) < w.cfg.Multi {
		if op == "trylock" {
			wait = core.NoWait // one attempt at each key
		}
		a.multiStep(ctx, stop, a.drawKeys(key), holder, budget, ttl, wait, ctxEnds)
		return
	}
	t0 := now()
	// Logged first, so that a call the worker dies in is still known to
	// the checker: what it may have taken in Redis has no holder.
	begin := Event{Ev: "begin", Worker: a.name, Key: key, Holder: holder, Op: op, Start: t0, TTL: int64(ttl)}
	w.log.add(begin, true)
	ctx = context.WithValue(ctx, callKey{}, &begin)
	locker := w.lockerNow()
	var lease *core.Lease
	var err error
	opts := []core.LockOption{core.WithTTL(ttl), core.WithWait(wait)}
	if op == "trylock" {
		lease, err = locker.TryLock(ctx, key, opts...)
	} else {
		lease, err = locker.Lock(ctx, key, opts...)
	}
	ev := Event{Ev: "call", Worker: a.name, Key: key, Holder: holder, Op: op, Start: t0, End: now(), Budget: int64(budget), TTL: int64(ttl), Res: result(err), Why: cause(err), Ends: t0 + int64(ctxEnds)}
	if err != nil {
		w.log.add(ev, true)
		return
	}
	ev.Fence, ev.Res = lease.Fence(), ResAcquired
	w.log.add(ev, true)
	a.hold(stop, locker, lease, key, holder, ttl)
}

// drawKey draws the key of a request, and whether it is a hot one: the
// first Hot keys take 70% of a lone worker's requests, all of the crowd's.
func (a *actor) drawKey() (string, bool) {
	w, rng := a.w, a.rng
	k := rng.IntN(w.cfg.Keys)
	hot := w.cfg.Hot > 0 && (w.cfg.Crowd > 0 || rng.IntN(100) < 70)
	if hot {
		k = rng.IntN(w.cfg.Hot)
	}
	return fmt.Sprintf("k%d", k), hot
}

// hold writes to the resource under lease for a while, sometimes
// re-entering, extending, or (a lone worker) closing the Locker instead of
// unlocking.
func (a *actor) hold(stop context.Context, locker *core.Locker, lease *core.Lease, key, holder string, ttl time.Duration) {
	w, rng := a.w, a.rng
	fence := lease.Fence()
	// The lease's context ending (lost, closed, or the request's deadline)
	// tells the holder to stop: from then on it no longer believes it holds
	// the lock. (An Unlock logs its end before, so that one comes first.)
	stopLost := context.AfterFunc(lease.Context(), func() {
		w.log.add(Event{Ev: "end", Worker: a.name, Key: key, Holder: holder, End: now(), Why: endWhy(lease.Context())}, true)
	})
	defer stopLost()
	writes := 1 + rng.IntN(4)
	gap := func() time.Duration { return time.Duration(rng.IntN(8)) * time.Millisecond }
	if w.cfg.Crowd > 0 {
		writes = 1
		gap = func() time.Duration { return time.Duration(rng.IntN(3)) * time.Millisecond }
	} else if w.cfg.Hold > 0 {
		gap = func() time.Duration { return w.cfg.Hold / time.Duration(writes) }
	} else if rng.Float64() < 0.1 && ttl <= 2*time.Second {
		// Longer than the TTL: only renewals keep it.
		long := time.Duration(float64(ttl) * (1.5 + 1.5*rng.Float64()))
		gap = func() time.Duration { return long / time.Duration(writes) }
	}
	for i := 0; i < writes && stop.Err() == nil; i++ {
		time.Sleep(gap())
		if !a.write(lease, key, holder, fence) {
			break
		}
		switch r := rng.Float64(); {
		case r < 0.15 && !shared(key): // a permit does not re-enter, nor is a read lock upgraded
			a.reenter(locker, lease, key, holder, fence, 1+rng.IntN(3))
		case r < 0.20:
			t0 := now()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			err := lease.Extend(ctx, ttl)
			cancel()
			w.log.add(Event{Ev: "call", Worker: a.name, Key: key, Holder: holder, Op: "extend", Start: t0, End: now(), Budget: int64(500 * time.Millisecond), TTL: int64(ttl), Res: result(err), Why: cause(err)}, true)
		}
	}
	if w.cfg.Crowd == 0 && rng.Float64() < 0.03 {
		// The Locker goes away while it holds the lease: Close leaves the
		// lock to expire, Shutdown releases it.
		w.log.add(Event{Ev: "end", Worker: a.name, Key: key, Holder: holder, End: now(), Why: "closed"}, true)
		if rng.IntN(2) == 0 {
			locker.Close()
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			locker.Shutdown(ctx)
			cancel()
		}
		w.newLocker()
		return
	}
	w.log.add(Event{Ev: "end", Worker: a.name, Key: key, Holder: holder, End: now(), Why: "unlock"}, true)
	t0 := now()
	err := lease.Unlock(context.Background())
	w.log.add(Event{Ev: "call", Worker: a.name, Key: key, Holder: holder, Op: "unlock", Start: t0, End: now(), Budget: int64(core.DefaultReleaseTimeout), TTL: int64(ttl), Res: result(err), Why: cause(err)}, true)
}

// write sends one write if the lease's context is live (always, for the
// ignorectx control), and reports whether to go on.
func (a *actor) write(lease interface{ Context() context.Context }, key, holder string, fence int64) bool {
	live := lease.Context().Err() == nil
	if !live && a.w.cfg.Lock != LockIgnoreCtx {
		return false
	}
	// Preparing the write after the check: a pause here (GC, a frozen VM)
	// makes the write late — the hazard fencing is for.
	time.Sleep(time.Duration(a.rng.IntN(4)) * time.Millisecond)
	t0 := now()
	r := a.res.write(key, holder, fence, live)
	a.w.log.add(Event{Ev: "write", Worker: a.name, Key: key, Holder: holder, Fence: fence, Start: t0, End: now(), Live: live, Res: r}, true)
	return true
}

// reenter nests depth re-entries of the held key, each writing once.
func (a *actor) reenter(locker *core.Locker, lease *core.Lease, key, holder string, fence int64, depth int) {
	if depth == 0 {
		return
	}
	t0 := now()
	ctx, cancel := context.WithTimeout(lease.Context(), time.Second)
	inner, err := locker.Lock(ctx, key)
	cancel()
	a.w.log.add(Event{Ev: "call", Worker: a.name, Key: key, Holder: holder, Op: "reenter", Start: t0, End: now(), Budget: int64(time.Second), Res: result(err), Fence: inner.Fence()}, true)
	if err != nil {
		return
	}
	if inner.Fence() != fence || !inner.Reentrant() {
		a.w.log.add(Event{Ev: "call", Worker: a.name, Key: key, Holder: holder, Op: "reenter", Res: ResOther + ": re-entry with another fence", Fence: inner.Fence()}, true)
	}
	if a.write(inner, key, holder, fence) {
		a.reenter(locker, inner, key, holder, fence, depth-1)
	}
	inner.Unlock(context.Background())
}

// cause is the text of an unavailable outcome, for the checker (which
// tells running out of time from other reasons); empty otherwise.
func cause(err error) string {
	if errors.Is(err, core.ErrUnavailable) {
		return err.Error()
	}
	return ""
}

// result names a Lock/Unlock outcome; unavailable first (a hung Redis),
// then busy, then the context's end.
func result(err error) string {
	switch {
	case err == nil:
		return ResOK
	case errors.Is(err, core.ErrUnavailable):
		return ResUnavailable
	case errors.Is(err, core.ErrNotObtained):
		return ResBusy
	case errors.Is(err, core.ErrClosed):
		return ResClosed
	case errors.Is(err, core.ErrNotHeld):
		return ResNotHeld
	case errors.Is(err, context.DeadlineExceeded):
		return ResDeadline
	case errors.Is(err, context.Canceled):
		return ResCanceled
	}
	return ResOther + ": " + err.Error()
}

// endWhy names why a lease's context ended, for the log: lost, closed,
// deadline, or context (the request's own end).
func endWhy(ctx context.Context) string {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, core.ErrLockLost):
		return "lost"
	case errors.Is(cause, core.ErrClosed):
		return "closed"
	case errors.Is(cause, context.DeadlineExceeded):
		return "deadline"
	}
	return "context"
}
