package core_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// masterHooks count what a Cluster client's master clients send: scripts
// alone and in pipelines, pipelines per master, and the redirects (MOVED)
// that pipelines met; sent, if set, is told each script sent to watch.
type masterHooks struct {
	scriptHook
	moved atomic.Int64

	mu      sync.Mutex
	pipedOn map[string]int

	watch string
	sent  chan struct{}
}

// hookedClusterClient is a client of cl whose master clients report to h.
// readTimeout, if not 0, replaces the Cluster's.
func hookedClusterClient(t *testing.T, cl *redistest.Cluster, ctxTimeout bool, h *masterHooks, readTimeout time.Duration) *redis.ClusterClient {
	o := cl.Options()
	if readTimeout != 0 {
		o.ReadTimeout = readTimeout
	}
	o.PoolSize = 80
	o.ContextTimeoutEnabled = ctxTimeout
	cc := redis.NewClusterClient(o)
	t.Cleanup(func() { cc.Close() })
	h.pipedOn = map[string]int{}
	cc.OnNewNode(func(n *redis.Client) { n.AddHook(&masterHook{h: h, addr: n.Options().Addr}) })
	return cc
}

// stop forgets the scripts sent so far and stops srv (SIGSTOP) until it is
// resumed or the test ends.
func (h *masterHooks) stop(t *testing.T, srv *redistest.Server) {
	for len(h.sent) > 0 {
		<-h.sent
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Resume() })
}

type masterHook struct {
	h    *masterHooks
	addr string
}

func (m *masterHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (m *masterHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isLockCall(cmd) {
			m.h.alone.Add(1)
			if m.h.sent != nil && m.addr == m.h.watch {
				select {
				case m.h.sent <- struct{}{}:
				default:
				}
			}
		}
		return next(ctx, cmd)
	}
}

func (m *masterHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if n := m.h.count(cmds); n > 0 {
			m.h.mu.Lock()
			m.h.pipedOn[m.addr] += n
			m.h.mu.Unlock()
		}
		err := next(ctx, cmds)
		for _, c := range cmds {
			if _, ok := redis.IsMovedError(c.Err()); ok {
				m.h.moved.Add(1)
			}
		}
		return err
	}
}

// On a Cluster, concurrent acquires and releases are coalesced per master:
// each pipeline goes to one master, on its own connection, and pipelines
// form on every master. Control: WithoutCoalescing pipes nothing.
func TestClusterCallsAreCoalescedPerMaster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	h := &masterHooks{}
	l := locktest.Locker(t, hookedClusterClient(t, cl, true, h, 0))
	locktest.Warm(t, l)
	const n = 2000
	cycles(t, l, 64, n)
	alone, piped, pipelines := h.alone.Load(), h.piped.Load(), h.pipelines.Load()
	t.Logf("64 callers, %d cycles: %d scripts alone, %d in %d pipelines, per master %v", n, alone, piped, pipelines, h.pipedOn)
	if alone+piped < 2*n {
		t.Fatalf("%d scripts for %d cycles", alone+piped, n)
	}
	if piped < n/2 || float64(piped)/float64(pipelines) < 2 {
		t.Fatalf("64 callers: %d of %d scripts piped, %.1f per pipeline; want many, several per pipeline", piped, alone+piped, float64(piped)/float64(max(pipelines, 1)))
	}
	if len(h.pipedOn) != len(cl.Servers) {
		t.Fatalf("pipelines on %d masters (%v), want on each of %d", len(h.pipedOn), h.pipedOn, len(cl.Servers))
	}

	// Control: without coalescing nothing is piped.
	h2 := &masterHooks{}
	l2 := locktest.Locker(t, hookedClusterClient(t, cl, true, h2, 0), core.WithoutCoalescing())
	cycles(t, l2, 64, 500)
	if h2.piped.Load() != 0 || h2.alone.Load() < 1000 {
		t.Fatalf("WithoutCoalescing: %d scripts alone, %d piped; want all alone", h2.alone.Load(), h2.piped.Load())
	}
}

// A hung master holds up only the calls on its own keys: with one master
// stopped (SIGSTOP) and four calls in flight to it (the client's read
// timeout 5s), 32 callers on another master's keys, each with a 1s budget,
// all lock and unlock in time, some of them in pipelines; the four end
// unavailable within their 2s budget. Both client kinds. Control: the
// one-pipe mutant queues every master's calls behind the hung master's, and
// they end unavailable.
func TestClusterHungMasterHoldsUpOnlyItsKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		ctxTimeout bool
		mutants    string
	}{
		{"default", false, ""},
		{"ctxtimeout", true, ""},
		{"control-one-pipe", true, "one-pipe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cl := redistest.StartCluster(t, 3)
			hung, other := cl.Servers[0], cl.Servers[1]
			h := &masterHooks{watch: hung.Addr, sent: make(chan struct{}, 64)}
			cc := hookedClusterClient(t, cl, tc.ctxTimeout, h, 5*time.Second)
			l := locktest.Locker(t, cc, core.WithMutants(tc.mutants))
			ctx := locktest.Context(t)
			names := namesPerNode(t, cl, cc, "hung", 32)
			for _, node := range []*redistest.Server{hung, other} { // scripts loaded, slot map known
				s, err := l.Lock(ctx, names[node][0])
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			h.stop(t, hung)
			var stuck sync.WaitGroup
			stuckErrs := make(chan error, 4)
			for i := 1; i <= 4; i++ {
				stuck.Go(func() {
					start := time.Now()
					s, err := l.Lock(ctx, names[hung][i], core.WithWait(2*time.Second))
					if err == nil {
						s.Unlock(ctx)
						err = errors.New("locked on a stopped master")
					} else if !errors.Is(err, core.ErrUnavailable) {
						err = fmt.Errorf("%w, want ErrUnavailable", err)
					} else if took := time.Since(start); took > 2*time.Second+budgetSlack {
						err = fmt.Errorf("took %v of a 2s budget", took)
					} else {
						err = nil
					}
					stuckErrs <- err
				})
			}
			for range 4 {
				select {
				case <-h.sent:
				case <-time.After(5 * time.Second):
					t.Fatal("the four calls to the stopped master were not sent")
				}
			}
			var late atomic.Int64
			errs := make(chan error, 3*len(names[other]))
			piped := func() bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				return h.pipedOn[other.Addr] > 0
			}
			// Up to three rounds, until some of them queue (on a loaded
			// machine one round's calls may not overlap enough).
			for round := 0; round < 3 && !piped(); round++ {
				var wg sync.WaitGroup
				for _, name := range names[other] {
					wg.Go(func() {
						for range 2 {
							start := time.Now()
							s, err := l.Lock(ctx, name, core.WithWait(time.Second))
							if err == nil {
								err = s.Unlock(ctx)
							}
							if time.Since(start) > time.Second+budgetSlack {
								late.Add(1)
							}
							if err != nil {
								errs <- err
								return
							}
						}
					})
				}
				wg.Wait()
				if len(errs) > 0 {
					break
				}
			}
			close(errs)
			var failed []error
			for err := range errs {
				failed = append(failed, err)
			}
			stuck.Wait()
			if err := hung.Resume(); err != nil {
				t.Fatal(err)
			}
			close(stuckErrs)
			for err := range stuckErrs {
				if err != nil {
					t.Errorf("a Lock on the stopped master: %v", err)
				}
			}
			if tc.mutants != "" {
				if len(failed) == 0 {
					t.Fatal("control: every call on the other master succeeded with one queue for every master; the test cannot tell")
				}
				if !errors.Is(failed[0], core.ErrUnavailable) {
					t.Fatalf("control: %v, want ErrUnavailable", failed[0])
				}
				return
			}
			if len(failed) > 0 || late.Load() > 0 {
				t.Fatalf("calls on a healthy master beside a stopped one: %d failed (first: %v), %d over budget", len(failed), failed, late.Load())
			}
			if !piped() {
				t.Fatal("no call on the healthy master was piped in three rounds: its calls did not queue, the scenario did not happen")
			}
		})
	}
}

// A batched call its master refuses as not its own (the slot moved since
// the client read its slot map) is redirected by the Cluster client and
// succeeds. After a slot migrates, its old master is stopped with four
// calls of the Locker in flight to it, so the 60 calls on names of the moved
// slot that follow queue for that master (the client's map is out of date;
// the test waits for the coalescer's signal of each).
// Resumed, it answers them MOVED (the probe must see that, or the scenario
// did not happen). Control: no-redirect, which sends the batch straight to
// the master the map names, and those calls fail.
func TestClusterBatchFollowsMovedSlot(t *testing.T) {
	t.Parallel()
	fixedAndControl(t, "no-redirect", func(t *testing.T, control bool, opts []core.Option) {
		batchFollowsMovedSlot(t, control, opts)
	})
}

func batchFollowsMovedSlot(t *testing.T, control bool, opts []core.Option) {
	cl := redistest.StartCluster(t, 3)
	slot := core.SlotOf("mv:0")
	from := cl.ServerForSlot(slot)
	h := &masterHooks{watch: from.Addr, sent: make(chan struct{}, 64)}
	cc := hookedClusterClient(t, cl, true, h, 5*time.Second) // the calls to the stopped master wait
	l := locktest.Locker(t, cc, opts...)
	queued := make(chan struct{}, 64)
	core.OnQueued(l, func() {
		select {
		case queued <- struct{}{}:
		default: // later calls (the unlocks) need not be counted
		}
	})
	ctx := locktest.Context(t)
	var moved []string
	for i := 0; len(moved) < 60; i++ {
		if name := "mv:" + strconv.Itoa(i); core.SlotOf(name) == slot {
			moved = append(moved, name)
		}
	}
	var stay []string
	for _, name := range namesPerNode(t, cl, cc, "stay", 4)[from] {
		if core.SlotOf(name) != slot {
			stay = append(stay, name)
		}
	}
	for _, name := range []string{moved[0], stay[0]} { // scripts loaded on the old master, slot map known
		s, err := l.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	to := 0
	if cl.Servers[0] == from {
		to = 1
	}
	if err := cl.MigrateSlot(slot, to, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// the scripts on the new master, through a client of its own
	if s, err := locktest.Locker(t, cl.Client(t)).Lock(ctx, moved[1]); err != nil {
		t.Fatal(err)
	} else if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	h.stop(t, from)
	var wg sync.WaitGroup
	errs := make(chan error, len(moved)+len(stay))
	lockUnlock := func(name string) {
		s, err := l.Lock(ctx, name, core.WithWait(5*time.Second))
		if err == nil {
			err = s.Unlock(ctx)
		}
		if err != nil {
			errs <- err
		}
	}
	for _, name := range stay {
		wg.Go(func() { lockUnlock(name) })
	}
	for range stay {
		within(t, h.sent, 5*time.Second, "a call to the stopped master")
	}
	for _, name := range moved {
		wg.Go(func() { lockUnlock(name) })
	}
	for range moved {
		within(t, queued, 3*time.Second, "a call queued for the stopped master")
	}
	if err := from.Resume(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	var failed []error
	for err := range errs {
		failed = append(failed, err)
	}
	if control {
		if len(failed) == 0 {
			t.Fatalf("control: every call succeeded without the redirect (%d MOVED); the test cannot tell", h.moved.Load())
		}
		return
	}
	if len(failed) > 0 {
		t.Fatalf("after the slot moved, %d calls failed: %v", len(failed), failed)
	}
	if h.moved.Load() == 0 {
		t.Fatalf("no pipeline met MOVED (%d scripts piped): the scenario did not happen", h.piped.Load())
	}
	t.Logf("%d batched calls met MOVED and were sent again", h.moved.Load())
}
