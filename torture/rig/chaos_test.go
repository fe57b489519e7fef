package rig

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A failover the sentinel makes by itself (here an operator's SENTINEL
// FAILOVER, sent past the rig, as a master that answers no PING for the
// sentinel's down-after would start one) is logged as a failover "by the
// sentinel" over the look before the switch and the look after it, within
// about masterLook: the window in which the checker excuses what a
// failover may lose or keep. Control: without watchMaster, the rig learns
// of it only at its next look, here 4s after the switch (as at the next
// Sentinel fault drawn), and the window it logs holds those 4s.
func TestSelfFailoverIsLoggedAtOnce(t *testing.T) {
	dep, err := newDeployment("sentinel", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dep.close()
	// masterLook on either side, and a look that failed (1s at most) on a
	// loaded machine
	const bound = 2 * time.Second
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprintf("watch=%v", watch), func(t *testing.T) {
			window, missed := selfFailoverWindow(t, dep, watch)
			if missed != "" {
				t.Fatal(missed)
			}
			switch {
			case watch && window > bound:
				t.Errorf("the failover is logged over %v, want at most %v", window, bound)
			case !watch && window <= bound:
				t.Errorf("control: without the watch the failover is still logged over only %v", window)
			}
		})
	}
}

// selfFailoverWindow has the sentinel fail dep's master over past a rig
// that watches it (watch) or looks 4s after the switch, and returns the
// window the rig logged the failover over, or what went wrong.
func selfFailoverWindow(t *testing.T, dep *deployment, watch bool) (time.Duration, string) {
	c, logged := testChaos(t, dep, &RunConfig{Topology: "sentinel"})
	c.moved = make(chan Fault, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	watched := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-watched
	})
	if watch {
		go func() {
			defer close(watched)
			c.watchMaster(ctx)
		}()
	} else {
		close(watched)
	}
	sent, switched := operatorFailover(t, ctx, dep)
	if watch {
		select { // the watch's look after the switch
		case <-c.moved:
		case <-time.After(5 * time.Second):
			t.Fatal("no failover by the sentinel logged within 5s of the switch")
		}
	} else {
		time.Sleep(4 * time.Second) // the control's rig looks this late
		c.master.Lock()
		c.reconcile()
		c.master.Unlock()
	}
	cancel()
	<-watched
	faults := logged()
	var got []Fault
	for _, f := range faults {
		if f.Kind == FaultFailover && f.Target == "by the sentinel" {
			got = append(got, f)
		}
	}
	if len(got) != 1 {
		return 0, fmt.Sprintf("%d failovers by the sentinel logged, want 1: %+v", len(got), faults)
	}
	f := got[0]
	t.Logf("logged from %v before the switch to %v after it", time.Duration(switched-f.Start), time.Duration(f.End-switched))
	if f.Start > switched || f.End < sent {
		return 0, fmt.Sprintf("logged window [%d, %d] misses the failover, asked for at %d and told at %d", f.Start, f.End, sent, switched)
	}
	return time.Duration(f.End - f.Start), ""
}

// operatorFailover has the sentinel fail the master over, past the rig,
// and returns when it asked (rig time) and when the sentinel told of the
// switch on its +switch-master channel (the switch itself is in between).
func operatorFailover(t *testing.T, ctx context.Context, dep *deployment) (sent, switched int64) {
	t.Helper()
	sc := redis.NewSentinelClient(&redis.Options{Addr: dep.st.SentinelAddrs[0]})
	defer sc.Close()
	sub := sc.Subscribe(ctx, "+switch-master")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	sent = now()
	for {
		// A failover still being finished answers INPROG, and one whose
		// old master is not yet a replica in sync NOGOODSLAVE: the next
		// one goes when it is.
		err := sc.Failover(ctx, dep.st.MasterName).Err()
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "INPROG") && !strings.Contains(err.Error(), "NOGOODSLAVE") || ctx.Err() != nil {
			t.Fatalf("SENTINEL FAILOVER: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("SENTINEL FAILOVER: INPROG until the test's end")
		case <-time.After(50 * time.Millisecond):
		}
	}
	select {
	case m := <-sub.Channel():
		switched = now()
		t.Logf("sentinel: +switch-master %s", m.Payload)
		return sent, switched
	case <-ctx.Done():
		t.Fatal("the sentinel never switched the master")
		return 0, 0
	}
}

// master_hang injects no hang within the checker's failover settle time
// of a failover the sentinel made by itself (the clients may still be on
// the old master, whose busy answers would be judged as a hung Redis's),
// and hangs the master otherwise: the control, the same draw without such
// a failover, logs one hang.
func TestMasterHangWaitsOutSelfFailover(t *testing.T) {
	dep, err := newDeployment("sentinel", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dep.close()
	for _, recent := range []bool{true, false} {
		c, logged := testChaos(t, dep, &RunConfig{Topology: "sentinel", ReadTimeout: 100 * time.Millisecond})
		if recent {
			c.movedAt = now() // as reconcile sets it when it sees one
		}
		c.inject(context.Background(), rand.New(rand.NewPCG(1, 1)), FaultMasterHang)
		hangs := 0
		for _, f := range logged() {
			if f.Kind == FaultMasterHang {
				hangs++
			}
		}
		switch {
		case recent && hangs != 0:
			t.Errorf("%d master hangs injected right after the sentinel's own failover, want none", hangs)
		case !recent && hangs != 1:
			t.Errorf("control: %d master hangs injected with no failover before, want 1", hangs)
		}
	}
}

// testChaos is a chaos of cfg on dep that knows dep's master and logs its
// faults to a file of its own; logged closes the log and returns them.
func testChaos(t *testing.T, dep *deployment, cfg *RunConfig) (c *chaos, logged func() []Fault) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "faults.jsonl")
	log, err := createLog(path)
	if err != nil {
		t.Fatal(err)
	}
	c = &chaos{cfg: cfg, dep: dep, log: log, counts: map[string]int{}}
	c.master.Lock()
	c.reconcile() // the rig knows the master
	c.master.Unlock()
	return c, func() []Fault {
		t.Helper()
		if err := log.close(); err != nil {
			t.Fatal(err)
		}
		faults, err := readLines[Fault](path)
		if err != nil {
			t.Fatal(err)
		}
		return faults
	}
}

// A master hang during which the sentinel's failover ends (one it had
// begun before: here an operator's SENTINEL FAILOVER, sent past the rig
// while the master is hung) is not logged as a hang, since the clients
// moved to the new master within it and its busy answers are no hung
// Redis's; the reconcile after it logs the failover instead. Control: the
// same hang with no failover is logged (hangMaster answers its start and end).
func TestMasterHangDuringSelfFailoverIsNotJudged(t *testing.T) {
	dep, err := newDeployment("sentinel", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dep.close()
	c, logged := testChaos(t, dep, &RunConfig{Topology: "sentinel"})
	c.master.Lock()
	m := c.dep.st.Master
	c.master.Unlock()
	// Control: a hang with no failover is one.
	if start, end, err := c.hangMaster(m, 200*time.Millisecond); err != nil || start == 0 || end-start < int64(200*time.Millisecond) {
		t.Fatalf("control: a 200ms hang with no failover = [%d, %d], %v; want it", start, end, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		start int64
		err   error
	}
	done := make(chan result, 1)
	go func() {
		start, _, err := c.hangMaster(m, 4*time.Second)
		done <- result{start, err}
	}()
	_, switched := operatorFailover(t, ctx, dep)
	r := <-done
	t.Logf("switched %v before the hang ended: hangMaster = %d, %v", time.Duration(now()-switched), r.start, r.err)
	if r.err == nil {
		t.Fatal("a hang during which the sentinel switched the master is judged as a hang")
	}
	failovers := 0
	for _, f := range logged() {
		if f.Kind == FaultFailover && f.Target == "by the sentinel" {
			failovers++
		}
	}
	if failovers != 1 {
		t.Fatalf("%d failovers by the sentinel logged, want 1", failovers)
	}
}
