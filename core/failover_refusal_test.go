package core_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// While a Sentinel or a Cluster fails over, the client dials the dead
// master's address until the replica is promoted (Sentinel: until the
// sentinels name it; Cluster: until the slot map does), and the dial is
// refused. A waiting Lock on such a client tries again within its budget
// (every 250ms at most); on a plain client a refusal ends it at once.
//
// Each round, on a master + replica + 3 sentinels (quorum 2) and on a
// 3-master Cluster with a replica each, the master (Cluster: the master of
// every key used) is killed while two Lockers work side by side, each on a
// client of its own: "retry" (the Locker as it is) and "definitive" (the
// refusal-definitive mutant: a refused dial ends a waiting Lock at once, as
// on a plain client). Each runs 6 workers, each starting a call every 100ms
// whether or not its earlier ones ended (requests arriving at a steady
// rate): 2 Lock with a 2s budget on one key, 2 Lock with a 5s budget on
// another, 2 TryLock on a third; a lock is held 20ms (Unlock tried again
// while it fails). The outcomes of the calls started during the failover
// (from the kill to the promotion) and after go to the log: how many
// obtained the lock and how long after the promotion, how many were busy or
// unavailable and how long those took, and when each key was first granted
// after the kill.
//
// Asserted each round, of a Lock with a 15s budget started right after the
// kill by an idle Locker (warmed: it has reached the deployment) on a client
// of its own: with retry it obtains the lock once the replica is promoted;
// controls: with definitive, and on a plain client of the killed master,
// it ends with ErrUnavailable naming "connection refused" within a second.
// On the Cluster, of TryLock (again every 100ms for 2s) 3s after the
// promotion by an idle Locker that did not call since the kill (its client
// maps the slot to the dead master): it obtains the lock, as the refused
// dial makes the client read its slot map again; control: with the
// no-slot-reload mutant every try is refused. And mutual exclusion for both policies: no key
// granted to a worker while another held it, fences increasing.
//
// One round of each in make test; LOCKGATE_FAILOVER_ROUNDS sets more (make
// failover).
func TestRefusalDuringFailover(t *testing.T) {
	t.Parallel()
	for _, topo := range []string{"sentinel", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			rounds := failoverRounds(t)
			if rounds == 1 {
				t.Parallel() // make test's one round; make failover's figures are taken one topology at a time
			}
			total := newRefusalFigures()
			for r := 0; r < rounds; r++ {
				t.Run(fmt.Sprintf("round%d", r), func(t *testing.T) {
					f := refusalRound(t, topo)
					total.add(f)
					t.Logf("%s round %d: %s", topo, r, f.probes())
				})
			}
			for _, line := range total.table(topo, rounds) {
				t.Log(line)
			}
		})
	}
}

// The refusal policies compared.
var refusalPolicies = []struct {
	name    string
	mutants string
}{
	{"retry", ""},
	{"definitive", "refusal-definitive"},
}

// The kinds of call each Locker's workers make.
var refusalKinds = []struct {
	name string
	wait time.Duration // 0: TryLock
}{
	{"Lock 2s", 2 * time.Second},
	{"Lock 5s", 5 * time.Second},
	{"TryLock", 0},
}

// refusalCall is one call a worker made: when it started and ended,
// relative to the kill, and how it ended.
type refusalCall struct {
	policy, kind, key string
	start, end        time.Duration // since the kill (negative: before)
	err               error
	during            bool          // started before the promotion
	lag               time.Duration // end - the promotion
}

// refusalFigures are one topology's figures, over one or more rounds.
type refusalFigures struct {
	mu        sync.Mutex
	calls     []refusalCall
	failover  []time.Duration     // kill to promotion, per round
	overlaps  map[string]int      // policy: a key granted while another worker held it
	regressed map[string]int      // policy: a fence not above the key's last one
	probe     map[string][]string // policy: the idle Lock's outcome per round
	probeOK   map[string]int
}

func newRefusalFigures() *refusalFigures {
	return &refusalFigures{overlaps: map[string]int{}, regressed: map[string]int{}, probe: map[string][]string{}, probeOK: map[string]int{}}
}

func (f *refusalFigures) add(o *refusalFigures) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range o.calls {
		c.key = fmt.Sprintf("%d/%s", len(f.failover), c.key) // per round
		f.calls = append(f.calls, c)
	}
	f.failover = append(f.failover, o.failover...)
	for p, n := range o.overlaps {
		f.overlaps[p] += n
	}
	for p, n := range o.regressed {
		f.regressed[p] += n
	}
	for p, s := range o.probe {
		f.probe[p] = append(f.probe[p], s...)
		f.probeOK[p] += o.probeOK[p]
	}
}

// probes is one round's idle Locks, for the log.
func (f *refusalFigures) probes() string {
	var parts []string
	for _, name := range []string{"retry", "definitive", "plain"} {
		parts = append(parts, name+": "+strings.Join(f.probe[name], "; "))
	}
	for _, name := range []string{"late", "late, no reload"} {
		if len(f.probe[name]) > 0 {
			parts = append(parts, "TryLock every 100ms for 2s, 3s after the promotion, by an idle Locker, "+name+": "+strings.Join(f.probe[name], "; "))
		}
	}
	return fmt.Sprintf("failover %v; idle Lock (15s budget) started at the kill: %s", f.failover[0].Round(10*time.Millisecond), strings.Join(parts, " | "))
}

// table is the figures as log lines (make failover keeps the ones that
// say "rounds:"). Per policy and kind of call, for the calls started during
// the failover (from the kill to the promotion) and after it: how many
// obtained the lock (and, of those started during, how long after the
// promotion at most), were busy, or were unavailable (and how long those
// took); then, per worker key, the first grant after the kill.
func (f *refusalFigures) table(topo string, rounds int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	head := fmt.Sprintf("%s, %d rounds:", topo, rounds)
	fo := slices.Clone(f.failover)
	slices.Sort(fo)
	lines := []string{fmt.Sprintf("%s failover (kill to promotion) %s", head, spread(fo))}
	for _, p := range refusalPolicies {
		for _, k := range refusalKinds {
			var cells []string
			for _, during := range []bool{true, false} {
				var ok, busy, unavail, refused, other int
				var lag, took []time.Duration
				seen := ""
				for _, c := range f.calls {
					if c.policy != p.name || c.kind != k.name || c.start < 0 || c.during != during {
						continue
					}
					switch {
					case c.err == nil:
						ok++
						if during {
							lag = append(lag, c.lag)
						}
					case errors.Is(c.err, core.ErrNotObtained):
						busy++
					case errors.Is(c.err, core.ErrUnavailable):
						unavail++
						took = append(took, c.end-c.start)
						if strings.Contains(c.err.Error(), "connection refused") {
							refused++
						}
					default:
						other++
						seen = c.err.Error()
					}
				}
				phase := "after"
				if during {
					phase = "during"
				}
				cell := fmt.Sprintf("%s %d: %d ok", phase, ok+busy+unavail+other, ok)
				if len(lag) > 0 {
					cell += fmt.Sprintf(" (obtained after the promotion: %s)", spread(lag))
				}
				if busy > 0 {
					cell += fmt.Sprintf(", %d busy", busy)
				}
				if unavail > 0 {
					cell += fmt.Sprintf(", %d unavailable (%d naming connection refused; took %s)", unavail, refused, spread(took))
				}
				if other > 0 {
					cell += fmt.Sprintf(", %d other (%s)", other, seen)
				}
				cells = append(cells, cell)
			}
			lines = append(lines, fmt.Sprintf("%s %s, %s: %s", head, p.name, k.name, strings.Join(cells, "; ")))
		}
		lines = append(lines, fmt.Sprintf("%s %s: first grant after the kill per key %s; idle Lock (15s budget) at the kill obtained in %d of %d; overlapping holders %d, fences not increasing %d",
			head, p.name, spread(f.firstGrants(p.name)), f.probeOK[p.name], len(f.probe[p.name]), f.overlaps[p.name], f.regressed[p.name]))
	}
	return lines
}

// firstGrants is, per round and worker key of policy, how long after the
// kill the first call that obtained the lock ended.
func (f *refusalFigures) firstGrants(policy string) []time.Duration {
	first := map[string]time.Duration{}
	for _, c := range f.calls {
		if c.policy != policy || c.err != nil || c.start < 0 {
			continue
		}
		if d, ok := first[c.key]; !ok || c.end < d {
			first[c.key] = c.end
		}
	}
	var ds []time.Duration
	for _, d := range first {
		ds = append(ds, d)
	}
	return ds
}

// spread is the median and the largest of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %v, max %v", s[len(s)/2].Round(10*time.Millisecond), s[len(s)-1].Round(10*time.Millisecond))
}

// refusalDeployment is a topology under test: clients of its own for each
// Locker, the lock names to use (on the master that is killed), and kill,
// which kills that master and returns once the replica is promoted.
type refusalDeployment struct {
	client func() redis.UniversalClient
	master string // the address of the master that is killed
	names  func(prefix string, n int) []string
	stop   func()       // kill the master
	kill   func() error // wait for the promotion
}

func startRefusalDeployment(t *testing.T, topo string) refusalDeployment {
	if topo == "sentinel" {
		sen := redistest.StartSentinels(t, 3)
		return refusalDeployment{
			client: func() redis.UniversalClient { return sen.Client(t) },
			names: func(prefix string, n int) []string {
				var ns []string
				for i := 0; i < n; i++ {
					ns = append(ns, fmt.Sprintf("%s%d", prefix, i))
				}
				return ns
			},
			master: sen.Master.Addr,
			stop:   sen.Master.Stop,
			kill:   func() error { return sen.KillMaster(30 * time.Second) },
		}
	}
	cl := redistest.StartCluster(t, 3)
	if err := cl.AddReplicas(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	cc := cl.Client(t)
	victim := cl.Servers[0]
	return refusalDeployment{
		client: func() redis.UniversalClient { return cl.Client(t) },
		names: func(prefix string, n int) []string {
			// Names whose slot the killed master serves.
			var ns []string
			ctx := locktest.Context(t)
			for i := 0; len(ns) < n && i < 10000; i++ {
				name := fmt.Sprintf("%s%d", prefix, i)
				slot, err := cc.ClusterKeySlot(ctx, locktest.RedisKey(name)).Result()
				if err != nil {
					t.Fatal(err)
				}
				if cl.ServerForSlot(int(slot)) == victim {
					ns = append(ns, name)
				}
			}
			return ns
		},
		master: victim.Addr,
		stop:   victim.Stop,
		kill:   func() error { return cl.KillMaster(0, 30*time.Second) },
	}
}

// refusalRound runs one round on topo and returns its figures.
func refusalRound(t *testing.T, topo string) *refusalFigures {
	dep := startRefusalDeployment(t, topo)
	f := newRefusalFigures()
	ctx := locktest.Context(t)

	type worker struct {
		l      *core.Locker
		policy string
		kind   int
		key    *refusalKey
	}
	var workers []worker
	idle := map[string]*core.Locker{}
	probeNames := dep.names("probe", 1)
	for _, p := range refusalPolicies {
		l := locktest.Locker(t, dep.client(), core.WithMutants(p.mutants))
		locktest.Warm(t, l)
		names := dep.names("fo-"+p.name+"-", len(refusalKinds))
		for k := range refusalKinds {
			key := &refusalKey{name: names[k]}
			for range 2 {
				workers = append(workers, worker{l, p.name, k, key})
			}
		}
		// An idle Locker of its own client, warmed: it knows the master.
		idle[p.name] = locktest.Locker(t, dep.client(), core.WithMutants(p.mutants))
	}
	// Control: a plain client of the master that is killed.
	plain := redis.NewClient(&redis.Options{Addr: dep.master})
	t.Cleanup(func() { plain.Close() })
	idle["plain"] = locktest.Locker(t, plain)
	// Cluster: two more idle Lockers that call only after the promotion,
	// with and without the slot map's reload after a refused dial. A
	// TryLock of a held lock warms them (their clients map the slots, the
	// server check is done, they have reached the deployment) without a
	// hold, whose watchdog would read the map again every 5s.
	late := map[string]*core.Locker{}
	if topo == "cluster" {
		late["late"] = locktest.Locker(t, dep.client())
		late["late, no reload"] = locktest.Locker(t, dep.client(), core.WithMutants("no-slot-reload"))
		s, err := locktest.Locker(t, dep.client()).Lock(ctx, probeNames[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range late {
			if _, err := l.TryLock(ctx, probeNames[0]); !errors.Is(err, core.ErrNotObtained) {
				t.Fatalf("warming TryLock of a held lock = %v, want busy", err)
			}
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, il := range idle {
		s, err := il.Lock(ctx, probeNames[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	type rawCall struct {
		w          worker
		start, end time.Time
		err        error
	}
	var callsMu sync.Mutex
	var calls []rawCall

	// Open loop: each worker starts a call every 100ms, whether or not its
	// earlier calls have ended (requests arriving at a steady rate), so
	// both policies answer the same calls.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	call := func(w worker) {
		defer wg.Done()
		kind := refusalKinds[w.kind]
		start := time.Now()
		var s *core.Lease
		var err error
		if kind.wait > 0 {
			s, err = w.l.Lock(ctx, w.key.name, core.WithWait(kind.wait))
		} else {
			s, err = w.l.TryLock(ctx, w.key.name)
		}
		callsMu.Lock()
		calls = append(calls, rawCall{w, start, time.Now(), err})
		callsMu.Unlock()
		if err == nil {
			w.key.hold(f, w.policy, s)
		}
	}
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				wg.Add(1)
				go call(w)
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
	}

	// Steady state first, then the kill; the idle Lockers each start one
	// Lock at once.
	steady := time.NewTimer(time.Second)
	<-steady.C
	dep.stop()
	killed := time.Now()
	type probeResult struct {
		policy string
		took   time.Duration
		err    error
	}
	probes := make(chan probeResult, len(idle))
	for name, il := range idle {
		go func() {
			start := time.Now()
			s, err := il.Lock(ctx, probeNames[0], core.WithWait(15*time.Second))
			took := time.Since(start)
			if err == nil {
				s.Unlock(ctx)
			}
			probes <- probeResult{name, took, err}
		}()
	}
	if err := dep.kill(); err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	failover := time.Since(killed)
	f.failover = append(f.failover, failover)

	got := map[string]probeResult{}
	for range idle {
		r := <-probes
		got[r.policy] = r
		if r.err == nil {
			f.probeOK[r.policy]++
			f.probe[r.policy] = append(f.probe[r.policy], fmt.Sprintf("obtained after %v (%v after the promotion)",
				r.took.Round(10*time.Millisecond), (r.took-failover).Round(10*time.Millisecond)))
		} else {
			f.probe[r.policy] = append(f.probe[r.policy], fmt.Sprintf("%v after %v", r.err, r.took.Round(10*time.Millisecond)))
		}
	}
	// Workers go on for 3s after the promotion, then end their calls.
	after := time.NewTimer(3 * time.Second)
	<-after.C
	close(stop)
	wg.Wait()
	for _, c := range calls {
		start := c.start.Sub(killed)
		f.calls = append(f.calls, refusalCall{
			policy: c.w.policy, kind: refusalKinds[c.w.kind].name, key: c.w.key.name,
			start: start, end: c.end.Sub(killed), err: c.err,
			during: start >= 0 && start < failover, lag: c.end.Sub(killed) - failover,
		})
	}

	if r := got["retry"]; r.err != nil {
		t.Errorf("retry: a Lock with a 15s budget started at the kill = %v after %v; the failover took %v", r.err, r.took, failover)
	}
	for _, name := range []string{"definitive", "plain"} {
		if r := got[name]; !errors.Is(r.err, core.ErrUnavailable) || !strings.Contains(r.err.Error(), "connection refused") || r.took > time.Second {
			t.Errorf("control: %s: a Lock started at the kill = %v after %v, want ErrUnavailable naming connection refused within 1s", name, r.err, r.took)
		}
	}
	// Cluster: TryLock after the promotion, again every 100ms for 2s, by a
	// Locker whose client still maps the slot to the dead master (a waiting
	// Lock would join the room, whose failed subscription reads the map
	// again): the first is refused, and the dial's failure makes the client
	// read its slot map again, so a later one obtains the lock. Control:
	// without that reload the client dials the dead master until go-redis's
	// own reload (every 60s).
	for name, il := range late {
		start := time.Now()
		tries, err := 0, error(nil)
		for time.Since(start) < 2*time.Second {
			var s *core.Lease
			tries++
			if s, err = il.TryLock(ctx, probeNames[0]); err == nil {
				s.Unlock(ctx)
				break
			}
			retry := time.NewTimer(100 * time.Millisecond)
			<-retry.C
		}
		took := time.Since(start)
		f.probe[name] = append(f.probe[name], fmt.Sprintf("%v after %d tries, %v", err, tries, took.Round(10*time.Millisecond)))
		switch {
		case name == "late" && err != nil:
			t.Errorf("TryLock after the promotion, by a Locker whose client mapped the slot to the dead master: %v after %d tries, %v", err, tries, took)
		case name != "late" && err == nil:
			t.Errorf("control: without the slot map's reload, TryLock after the promotion obtained the lock (try %d, after %v)", tries, took)
		}
	}
	for _, p := range refusalPolicies {
		if f.overlaps[p.name] > 0 || f.regressed[p.name] > 0 {
			t.Errorf("%s: %d grants of a key held by another worker, %d fences not above the key's last", p.name, f.overlaps[p.name], f.regressed[p.name])
		}
	}
	return f
}

// refusalKey is one lock name and what the workers saw of its holders.
type refusalKey struct {
	name   string
	mu     sync.Mutex
	holder int64 // the fence of the worker holding it, 0: none
	last   int64 // the last fence granted
}

// hold checks the grant of s against the key's holders, holds it 20ms and
// unlocks it (again while Redis is unavailable, within the lease's TTL).
func (k *refusalKey) hold(f *refusalFigures, policy string, s *core.Lease) {
	fence := s.Fence()
	k.mu.Lock()
	overlap, regressed := k.holder != 0, fence <= k.last
	k.holder, k.last = fence, max(k.last, fence)
	k.mu.Unlock()
	if overlap || regressed {
		f.mu.Lock()
		if overlap {
			f.overlaps[policy]++
		}
		if regressed {
			f.regressed[policy]++
		}
		f.mu.Unlock()
	}
	work := time.NewTimer(20 * time.Millisecond)
	<-work.C
	k.mu.Lock()
	if k.holder == fence {
		k.holder = 0
	}
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		err := s.Unlock(ctx)
		if err == nil || !errors.Is(err, core.ErrUnavailable) || ctx.Err() != nil {
			return
		}
		retry := time.NewTimer(100 * time.Millisecond)
		<-retry.C
	}
}

// A refused dial is taken for a failover only by a Locker that has reached
// its deployment before: a Cluster whose every seed refuses ends a fresh
// Locker's Lock (8s budget) and TryLock at once, naming the refusal (a wrong
// address, or a deployment down at start-up, is not a failover): a call not
// answered within 100ms dials the seeds itself (before: Lock ended after
// go-redis's own dial retries, about 2.4s; TryLock said only "no answer"
// after its 500ms). Controls: a Locker that had locked on the same Cluster,
// on a client of its own, tries again until its budget ends, and then names
// the refusal too; a fresh Locker whose seeds are three refusing addresses
// and one live node obtains the lock with Lock (the probe does not take one refusal
// for all).
func TestRefusalBeforeReached(t *testing.T) {
	t.Parallel()
	const budget = 8 * time.Second
	cl := redistest.StartCluster(t, 3)
	ctx := locktest.Context(t)
	var dead []string
	for range 3 {
		s := redistest.Start(t)
		s.Stop()
		dead = append(dead, s.Addr)
	}
	mixed := redis.NewClusterClient(&redis.ClusterOptions{Addrs: append(dead, cl.Servers[0].Addr)})
	t.Cleanup(func() { mixed.Close() })
	// (Lock, not TryLock: go-redis tries the seeds one by one, each
	// refusing one with its dial retries, longer than a single attempt's
	// budget.)
	s, err := locktest.Locker(t, mixed).Lock(ctx, "mixed", core.WithWait(budget))
	if err != nil {
		t.Fatalf("control: a fresh Locker with one live seed among refusing ones: Lock = %v, want the lock", err)
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	reached := locktest.Locker(t, cl.Client(t))
	locktest.Warm(t, reached)
	for _, s := range cl.Servers {
		s.Stop()
	}
	type result struct {
		took time.Duration
		err  error
	}
	results := make(chan result, 1)
	go func() {
		start := time.Now()
		_, err := reached.Lock(ctx, "warm", core.WithWait(budget))
		results <- result{time.Since(start), err}
	}()
	for _, call := range []string{"Lock", "TryLock"} {
		fresh := locktest.Locker(t, cl.Client(t))
		start := time.Now()
		var err error
		if call == "Lock" {
			_, err = fresh.Lock(ctx, "warm", core.WithWait(budget))
		} else {
			_, err = fresh.TryLock(ctx, "warm")
		}
		took := time.Since(start)
		t.Logf("fresh Locker's %s: %v after %v", call, err, took.Round(time.Millisecond))
		if !errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("fresh Locker's %s = %v, want ErrUnavailable naming connection refused", call, err)
		}
		if took > time.Second {
			t.Errorf("fresh Locker's %s took %v: a refusal before any answer ends the call at once", call, took)
		}
	}
	r := <-results
	t.Logf("control, reached Locker: %v after %v", r.err, r.took.Round(time.Millisecond))
	if !errors.Is(r.err, core.ErrUnavailable) || !strings.Contains(r.err.Error(), "connection refused") {
		t.Fatalf("reached Locker's Lock = %v, want ErrUnavailable naming connection refused", r.err)
	}
	if r.took < budget-100*time.Millisecond {
		t.Errorf("control: the reached Locker's Lock ended after %v, before its %v budget: it did not try again", r.took, budget)
	}
}

// A Cluster client that dials its nodes elsewhere than their addresses
// (ClusterOptions.NewClient: a port forward, a proxy) is not probed: its
// seed address refuses a direct dial, yet the Cluster answers through the
// client. Its first Lock, slow enough to outlast the probe's 100ms (each
// dial takes 150ms), gets the lock. (Dialling the seeds as they are
// written ended it with "connection refused".)
func TestNoProbeThroughNewClient(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	gone := redistest.Start(t)
	gone.Stop()
	o := cl.Options()
	o.Addrs = []string{gone.Addr}
	o.NewClient = func(opt *redis.Options) *redis.Client {
		if opt.Addr == gone.Addr {
			opt.Addr = cl.Servers[0].Addr // the forward
		}
		opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			t := time.NewTimer(150 * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		return redis.NewClient(opt)
	}
	c := redis.NewClusterClient(o)
	t.Cleanup(func() { c.Close() })
	ctx := locktest.Context(t)
	s, err := locktest.Locker(t, c).Lock(ctx, "forwarded", core.WithWait(5*time.Second))
	if err != nil {
		t.Fatalf("Lock on a Cluster reached through NewClient = %v, want the lock", err)
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Sentinel failover client whose sentinels all refuse connections: a
// Locker told their addresses (WithSentinelAddrs) ends Lock and TryLock at
// once with ErrUnavailable naming the refusal; one not told them (the
// control) ends Lock with its budget. A live sentinel among refusing ones
// is enough for the call to go on and get the lock (control: the probe does
// not take a refusing address for the deployment).
func TestSentinelsRefusing(t *testing.T) {
	t.Parallel()
	const budget = 3 * time.Second
	ctx := locktest.Context(t)
	var dead []string
	for range 3 {
		s := redistest.Start(t)
		s.Stop()
		dead = append(dead, s.Addr)
	}
	failover := func(addrs []string) *redis.Client {
		c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: addrs})
		t.Cleanup(func() { c.Close() })
		return c
	}
	told := failover(dead)
	for _, call := range []string{"Lock", "TryLock"} {
		l := locktest.Locker(t, told, core.WithSentinelAddrs(dead...))
		start := time.Now()
		var err error
		if call == "Lock" {
			_, err = l.Lock(ctx, "k", core.WithWait(budget))
		} else {
			_, err = l.TryLock(ctx, "k")
		}
		took := time.Since(start)
		t.Logf("told the sentinels, %s: %v after %v", call, err, took.Round(time.Millisecond))
		if !errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") ||
			!strings.Contains(err.Error(), "sentinel") {
			t.Fatalf("%s = %v, want ErrUnavailable naming the sentinels' refusal", call, err)
		}
		if took > time.Second {
			t.Errorf("%s took %v: every sentinel refusing ends the call at once", call, took)
		}
	}

	start := time.Now()
	_, err := locktest.Locker(t, failover(dead)).Lock(ctx, "k", core.WithWait(budget))
	took := time.Since(start)
	t.Logf("control, not told: %v after %v", err, took.Round(time.Millisecond))
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("control: Lock = %v, want ErrUnavailable", err)
	}
	if took < budget-100*time.Millisecond {
		t.Errorf("control: Lock ended after %v, before its %v budget: the refusal was seen without the addresses", took, budget)
	}

	live := redistest.StartSentinel(t)
	mixed := append(slices.Clone(dead), live.SentinelAddrs...)
	o := live.Options()
	o.SentinelAddrs = mixed
	c := redis.NewFailoverClient(o)
	t.Cleanup(func() { c.Close() })
	lease, err := locktest.Locker(t, c, core.WithSentinelAddrs(mixed...)).Lock(ctx, "k", core.WithWait(budget))
	if err != nil {
		t.Fatalf("one live sentinel among refusing ones: Lock = %v, want the lock", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// WithSentinelAddrs on a client that is not a Sentinel failover client, or
// with an empty address, is an error from New.
func TestSentinelAddrsInvalid(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	plain := s.Client(t)
	if _, err := core.New(plain, core.WithSentinelAddrs("127.0.0.1:1")); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("New(plain client, WithSentinelAddrs) = %v, want ErrInvalid", err)
	}
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	defer failover.Close()
	if _, err := core.New(failover, core.WithSentinelAddrs("")); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("New(WithSentinelAddrs(\"\")) = %v, want ErrInvalid", err)
	}
	l, err := core.New(failover, core.WithSentinelAddrs("127.0.0.1:1"))
	if err != nil {
		t.Fatalf("control: New(failover client, WithSentinelAddrs) = %v", err)
	}
	l.Close()
}
