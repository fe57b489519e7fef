package rig

import (
	"context"
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
// of it only at its next look, here 2s after the switch (as at the next
// Sentinel fault drawn), and the window it logs holds those 2s.
func TestSelfFailoverIsLoggedAtOnce(t *testing.T) {
	dep, err := newDeployment("sentinel", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dep.close()
	const bound = time.Second // masterLook, and a loaded machine's margin
	for _, watch := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "faults.jsonl")
		log, err := createLog(path)
		if err != nil {
			t.Fatal(err)
		}
		c := &chaos{cfg: &RunConfig{Topology: "sentinel"}, dep: dep, log: log, counts: map[string]int{}}
		c.master.Lock()
		c.reconcile() // the rig knows the master
		c.master.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		watched := make(chan struct{})
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
			// The watch's look after the switch: at most masterLook away.
			waitLogged(t, path, 5*time.Second)
		} else {
			time.Sleep(2 * time.Second) // the control's rig looks this late
			c.master.Lock()
			c.reconcile()
			c.master.Unlock()
		}
		cancel()
		<-watched
		if err := log.close(); err != nil {
			t.Fatal(err)
		}
		faults, err := readLines[Fault](path)
		if err != nil {
			t.Fatal(err)
		}
		var got []Fault
		for _, f := range faults {
			if f.Kind == FaultFailover && f.Target == "by the sentinel" {
				got = append(got, f)
			}
		}
		if len(got) != 1 {
			t.Fatalf("watch %v: %d failovers by the sentinel logged, want 1: %+v", watch, len(got), faults)
		}
		f := got[0]
		window := time.Duration(f.End - f.Start)
		t.Logf("watch %v: logged from %v before the switch to %v after it", watch, time.Duration(switched-f.Start), time.Duration(f.End-switched))
		if f.Start > switched || f.End < sent {
			t.Errorf("watch %v: logged window [%d, %d] misses the failover, asked for at %d and told at %d", watch, f.Start, f.End, sent, switched)
		}
		switch {
		case watch && window > bound:
			t.Errorf("the failover is logged over %v, want at most %v", window, bound)
		case !watch && window <= bound:
			t.Errorf("control: without the watch the failover is still logged over only %v", window)
		}
	}
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

// waitLogged waits (within d) until the fault log at path holds a
// failover: a file, which nothing signals, read every 20ms.
func waitLogged(t *testing.T, path string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		faults, err := readLines[Fault](path)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range faults {
			if f.Kind == FaultFailover {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no failover logged within %v", d)
}
