package rig

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
)

// requestTimeout is the deadline of a worker's request: the Lock call and
// the hold under it.
const requestTimeout = 3 * time.Second

// Lock implementations a worker can use. Only lockgate is expected to pass;
// the others are the checker's controls.
const (
	LockGate      = "lockgate"  // core.Locker, the holder checks its lease context before each write
	LockNaive     = "naive"     // the seed's SET NX PX + DEL: no owner check, no renewal, no fence
	LockIgnoreCtx = "ignorectx" // core.Locker, but the holder ignores its lease context and writes on
)

// WorkerConfig is one worker process.
type WorkerConfig struct {
	Name        string // w<i>.<generation>
	Redis       string // host:port (through the fault proxy), or the sentinels' addresses, comma-separated
	MasterName  string // Sentinel master name; empty for a plain server
	Resource    string
	Keys        int
	Seed        uint64
	Lock        string
	TTL         time.Duration
	Wait        time.Duration
	ReadTimeout time.Duration
	CtxTimeout  bool // the client's ContextTimeoutEnabled
	Redlock     bool // Redis is the comma-separated addresses of Redlock's masters
	Log         string
}

type worker struct {
	cfg    WorkerConfig
	rng    *rand.Rand
	log    *jsonLog
	res    *resourceClient
	client redis.UniversalClient
	nodes  []redis.UniversalClient // Redlock's masters (client is the first)
	locker *core.Locker
	holds  atomic.Int64
}

// WorkerMain is the worker process: it parses the flags Run gives it and
// runs the workload until ctx ends (the controller's SIGTERM).
func WorkerMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var cfg WorkerConfig
	var seed int64
	fs.StringVar(&cfg.Name, "name", "w0.0", "worker name")
	fs.StringVar(&cfg.Log, "log", "", "log file")
	fs.StringVar(&cfg.Redis, "redis", "", "Redis address, or the sentinels' addresses with -master")
	fs.StringVar(&cfg.MasterName, "master", "", "Sentinel master name")
	fs.StringVar(&cfg.Resource, "resource", "", "resource address")
	fs.IntVar(&cfg.Keys, "keys", 3, "keys")
	fs.Int64Var(&seed, "seed", 1, "seed")
	fs.StringVar(&cfg.Lock, "lock", LockGate, "lock implementation")
	fs.DurationVar(&cfg.TTL, "ttl", 500*time.Millisecond, "lease time")
	fs.DurationVar(&cfg.Wait, "wait", time.Second, "wait budget")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", 300*time.Millisecond, "go-redis read timeout")
	fs.BoolVar(&cfg.CtxTimeout, "ctx-timeout", false, "go-redis ContextTimeoutEnabled")
	fs.BoolVar(&cfg.Redlock, "redlock", false, "-redis names Redlock's masters, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Seed = uint64(seed)
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
	w := &worker{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x70727475)), log: lg, res: &resourceClient{addr: cfg.Resource}}
	if cfg.MasterName != "" {
		w.client = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: cfg.MasterName, SentinelAddrs: strings.Split(cfg.Redis, ","),
			ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.ReadTimeout, DialTimeout: time.Second,
			ContextTimeoutEnabled: cfg.CtxTimeout, PoolSize: 4,
		})
	} else {
		for _, addr := range strings.Split(cfg.Redis, ",") {
			c := redis.NewClient(&redis.Options{
				Addr: addr, ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.ReadTimeout, DialTimeout: time.Second,
				ContextTimeoutEnabled: cfg.CtxTimeout, PoolSize: 4,
			})
			defer c.Close()
			w.nodes = append(w.nodes, c)
		}
		w.client = w.nodes[0]
	}
	if cfg.MasterName != "" {
		defer w.client.Close()
	}
	if err := w.newLocker(); err != nil {
		return err
	}
	for ctx.Err() == nil {
		w.step(ctx)
		time.Sleep(time.Duration(w.rng.IntN(3)) * time.Millisecond) // think time between requests
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.locker.Shutdown(sctx)
	return nil
}

func (w *worker) newLocker() error {
	var l *core.Locker
	var err error
	if w.cfg.Redlock {
		l, err = core.NewRedlock(w.nodes, core.WithTTL(w.cfg.TTL), core.WithWait(w.cfg.Wait))
	} else {
		l, err = core.New(w.client, core.WithTTL(w.cfg.TTL), core.WithWait(w.cfg.Wait))
	}
	w.locker = l
	return err
}

// step is one request: lock a random key (waiting, trying once, or
// giving up early), and hold it for a while.
func (w *worker) step(stop context.Context) {
	key := fmt.Sprintf("k%d", w.rng.IntN(w.cfg.Keys))
	// The request: its deadline bounds the whole handler, and so the
	// lease's context too.
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	var op string
	var budget time.Duration
	switch r := w.rng.Float64(); {
	case r < 0.70:
		op, budget = "lock", w.cfg.Wait
	case r < 0.85:
		op, budget = "trylock", requestTimeout
	default:
		// A caller that gives up: its context ends while it waits. (The
		// budget stays the wait: a call in flight to Redis is waited for.)
		op, budget = "cancel", w.cfg.Wait
		var c context.CancelFunc
		ctx, c = context.WithCancel(ctx)
		t := time.AfterFunc(time.Duration(5+w.rng.IntN(45))*time.Millisecond, c)
		parent := cancel
		cancel = func() { t.Stop(); c(); parent() }
	}
	defer cancel()
	holder := fmt.Sprintf("%s#%d", w.cfg.Name, w.holds.Add(1))
	if w.cfg.Lock == LockNaive {
		w.naiveStep(ctx, stop, key, holder, op, budget)
		return
	}
	t0 := now()
	// Logged first, so that a call the worker dies in is still known to
	// the checker: what it may have taken in Redis has no holder.
	w.log.add(Event{Ev: "begin", Worker: w.cfg.Name, Key: key, Op: op, Start: t0}, true)
	var lease *core.Lease
	var err error
	if op == "trylock" {
		lease, err = w.locker.TryLock(ctx, key)
	} else {
		lease, err = w.locker.Lock(ctx, key)
	}
	ev := Event{Ev: "call", Worker: w.cfg.Name, Key: key, Op: op, Start: t0, End: now(), Budget: int64(budget), Res: result(err)}
	if err != nil {
		w.log.add(ev, true)
		return
	}
	ev.Holder, ev.Fence, ev.Res = holder, lease.Fence(), ResAcquired
	w.log.add(ev, true)
	w.hold(stop, lease, key, holder)
}

// hold writes to the resource under lease for a while, sometimes
// re-entering, extending, or closing the Locker instead of unlocking.
func (w *worker) hold(stop context.Context, lease *core.Lease, key, holder string) {
	fence := lease.Fence()
	// The lease's context ending (lost, closed, or the request's deadline)
	// tells the holder to stop: from then on it no longer believes it holds
	// the lock. (An Unlock logs its end before, so that one comes first.)
	stopLost := context.AfterFunc(lease.Context(), func() {
		why := "context"
		switch cause := context.Cause(lease.Context()); {
		case errors.Is(cause, core.ErrLockLost):
			why = "lost"
		case errors.Is(cause, core.ErrClosed):
			why = "closed"
		case errors.Is(cause, context.DeadlineExceeded):
			why = "deadline"
		}
		w.log.add(Event{Ev: "end", Worker: w.cfg.Name, Key: key, Holder: holder, End: now(), Why: why}, true)
	})
	defer stopLost()
	writes := 1 + w.rng.IntN(4)
	gap := func() time.Duration { return time.Duration(w.rng.IntN(8)) * time.Millisecond }
	if w.rng.Float64() < 0.1 {
		// Longer than the TTL: only renewals keep it.
		long := time.Duration(float64(w.cfg.TTL) * (1.5 + 1.5*w.rng.Float64()))
		gap = func() time.Duration { return long / time.Duration(writes) }
	}
	for i := 0; i < writes && stop.Err() == nil; i++ {
		time.Sleep(gap())
		if !w.write(lease, key, holder, fence) {
			break
		}
		switch r := w.rng.Float64(); {
		case r < 0.15:
			w.reenter(lease, key, holder, fence, 1+w.rng.IntN(3))
		case r < 0.20:
			t0 := now()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			err := lease.Extend(ctx, w.cfg.TTL)
			cancel()
			w.log.add(Event{Ev: "call", Worker: w.cfg.Name, Key: key, Holder: holder, Op: "extend", Start: t0, End: now(), Budget: int64(500 * time.Millisecond), Res: result(err)}, true)
		}
	}
	if w.rng.Float64() < 0.03 {
		// The Locker goes away while it holds the lease: Close leaves the
		// lock to expire, Shutdown releases it.
		w.log.add(Event{Ev: "end", Worker: w.cfg.Name, Key: key, Holder: holder, End: now(), Why: "closed"}, true)
		if w.rng.IntN(2) == 0 {
			w.locker.Close()
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			w.locker.Shutdown(ctx)
			cancel()
		}
		w.newLocker()
		return
	}
	w.log.add(Event{Ev: "end", Worker: w.cfg.Name, Key: key, Holder: holder, End: now(), Why: "unlock"}, true)
	t0 := now()
	err := lease.Unlock(context.Background())
	w.log.add(Event{Ev: "call", Worker: w.cfg.Name, Key: key, Holder: holder, Op: "unlock", Start: t0, End: now(), Budget: int64(core.DefaultReleaseTimeout), Res: result(err)}, true)
}

// write sends one write if the lease's context is live (always, for the
// ignorectx control), and reports whether to go on.
func (w *worker) write(lease *core.Lease, key, holder string, fence int64) bool {
	live := lease.Context().Err() == nil
	if !live && w.cfg.Lock != LockIgnoreCtx {
		return false
	}
	// Preparing the write after the check: a pause here (GC, a frozen VM)
	// makes the write late — the hazard fencing is for.
	time.Sleep(time.Duration(w.rng.IntN(4)) * time.Millisecond)
	t0 := now()
	r := w.res.write(key, holder, fence, live)
	w.log.add(Event{Ev: "write", Worker: w.cfg.Name, Key: key, Holder: holder, Fence: fence, Start: t0, End: now(), Live: live, Res: r}, true)
	return true
}

// reenter nests depth re-entries of the held key, each writing once.
func (w *worker) reenter(lease *core.Lease, key, holder string, fence int64, depth int) {
	if depth == 0 {
		return
	}
	t0 := now()
	ctx, cancel := context.WithTimeout(lease.Context(), w.cfg.Wait)
	inner, err := w.locker.Lock(ctx, key)
	cancel()
	w.log.add(Event{Ev: "call", Worker: w.cfg.Name, Key: key, Holder: holder, Op: "reenter", Start: t0, End: now(), Budget: int64(w.cfg.Wait), Res: result(err), Fence: inner.Fence()}, true)
	if err != nil {
		return
	}
	if inner.Fence() != fence || !inner.Reentrant() {
		w.log.add(Event{Ev: "call", Worker: w.cfg.Name, Key: key, Holder: holder, Op: "reenter", Res: ResOther + ": re-entry with another fence", Fence: inner.Fence()}, true)
	}
	if w.write(inner, key, holder, fence) {
		w.reenter(inner, key, holder, fence, depth-1)
	}
	inner.Unlock(context.Background())
}

// naiveStep is the seed's first lock: SET key token NX PX ttl, retried
// every 10ms within the budget, and DEL to release — it deletes whatever
// lock is there, renews nothing and has no fence.
func (w *worker) naiveStep(ctx, stop context.Context, key, holder, op string, budget time.Duration) {
	t0 := now()
	w.log.add(Event{Ev: "begin", Worker: w.cfg.Name, Key: key, Op: op, Start: t0}, true)
	deadline := time.Now().Add(budget)
	res := ResBusy
	for {
		ok, err := w.client.SetNX(ctx, "naive:"+key, holder, w.cfg.TTL).Result()
		if err != nil {
			res = result(err)
			if ctx.Err() == nil {
				res = ResUnavailable
			}
			break
		}
		if ok {
			res = ResAcquired
			break
		}
		if op == "trylock" || !time.Now().Before(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ev := Event{Ev: "call", Worker: w.cfg.Name, Key: key, Op: op, Start: t0, End: now(), Budget: int64(budget), Res: res}
	if res != ResAcquired {
		w.log.add(ev, true)
		return
	}
	ev.Holder = holder
	w.log.add(ev, true)
	writes := 1 + w.rng.IntN(4)
	gap := time.Duration(w.rng.IntN(8)) * time.Millisecond
	if w.rng.Float64() < 0.1 {
		gap = time.Duration(float64(w.cfg.TTL)*(1.5+1.5*w.rng.Float64())) / time.Duration(writes)
	}
	for i := 0; i < writes && stop.Err() == nil; i++ {
		time.Sleep(gap)
		t := now()
		r := w.res.write(key, holder, 0, true)
		w.log.add(Event{Ev: "write", Worker: w.cfg.Name, Key: key, Holder: holder, Start: t, End: now(), Live: true, Res: r}, true)
	}
	w.log.add(Event{Ev: "end", Worker: w.cfg.Name, Key: key, Holder: holder, End: now(), Why: "unlock"}, true)
	w.client.Del(context.Background(), "naive:"+key)
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
