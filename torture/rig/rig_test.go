package rig_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockgate/lockgate/torture/rig"
)

// TestMain makes the test binary a worker when Run starts it as one, and
// otherwise runs the tests and checks for leaked goroutines.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		err := rig.WorkerMain(ctx, os.Args[2:])
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func run(t *testing.T, cfg rig.RunConfig) *rig.Report {
	t.Helper()
	cfg.Bin = os.Args[0]
	cfg.Dir = t.TempDir()
	cfg.Fenced = true
	rep, err := rig.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Print(&b, cfg.Seed, cfg.Duration)
	t.Log(b.String())
	return rep
}

// The CI size of `make torture`: lockgate under every fault kind of the
// single topology keeps its promises. The probes: every kind was injected,
// and the faults made holders overlap (frozen holders, lost Redis data).
func TestRigCI(t *testing.T) {
	rep := run(t, rig.RunConfig{Workers: 4, Keys: 3, Duration: 30 * time.Second, Seed: 1})
	if n := rep.Violations(); n != 0 {
		t.Errorf("%d violations", n)
	}
	if n := len(rep.Deadlocks); n != 0 {
		t.Errorf("%d deadlocks", n)
	}
	for _, kind := range []string{rig.FaultPause, rig.FaultKill, rig.FaultRestart, rig.FaultHangShort, rig.FaultHangLong, rig.FaultLateReply, rig.FaultCut, rig.FaultLatency} {
		if rep.Faults[kind] == 0 {
			t.Errorf("probe: no %s fault was injected", kind)
		}
	}
	if rep.Acquired == 0 || rep.Accepted == 0 {
		t.Errorf("probe: nothing was locked or written (%d acquired, %d writes accepted)", rep.Acquired, rep.Accepted)
	}
	if rep.FrozenOverlaps+rep.StateLossOverlaps == 0 {
		t.Errorf("probe: no holder overlapped another: the faults did not bite")
	}
}

// The CI size of the Redlock topology: workers on core.NewRedlock over 3
// masters, each master restarted, hung and faulted on the network in turn;
// one master's fault must break no promise (nothing is excused for it; two
// masters faulted at once are an outage).
// Probes: every kind was injected, and something was locked and written.
func TestRigRedlockCI(t *testing.T) {
	rep := run(t, rig.RunConfig{Workers: 4, Keys: 3, Duration: 20 * time.Second, Seed: 4, Topology: "redlock"})
	if n := rep.Violations(); n != 0 {
		t.Errorf("%d violations", n)
	}
	// A "busy" from a split (another owner's partial grants, given back)
	// looks like a deadlock to the checker: logged, not failed.
	for _, d := range rep.Deadlocks {
		t.Logf("busy with no hold the checker knows of (a split?): %s", d)
	}
	for _, kind := range []string{rig.FaultPause, rig.FaultKill, rig.FaultNodeRestart, rig.FaultNodeHang, rig.FaultNodeNet} {
		if rep.Faults[kind] == 0 {
			t.Errorf("probe: no %s fault was injected", kind)
		}
	}
	if rep.Acquired == 0 || rep.Accepted == 0 {
		t.Errorf("probe: nothing was locked or written (%d acquired, %d writes accepted)", rep.Acquired, rep.Accepted)
	}
}

// The controls: the checker catches a broken lock and a broken holder.
func TestRigControls(t *testing.T) {
	t.Run("naive SET NX + DEL", func(t *testing.T) {
		rep := run(t, rig.RunConfig{Workers: 4, Keys: 3, Duration: 8 * time.Second, Seed: 2, Lock: rig.LockNaive})
		if len(rep.Dishonest) == 0 || len(rep.Interleaved) == 0 {
			t.Fatalf("naive lock: %d dishonest holders, %d interleaved writes; want both above 0", len(rep.Dishonest), len(rep.Interleaved))
		}
	})
	t.Run("holder ignoring its lease context", func(t *testing.T) {
		rep := run(t, rig.RunConfig{Workers: 4, Keys: 3, Duration: 10 * time.Second, Seed: 3, Lock: rig.LockIgnoreCtx,
			Faults: []string{rig.FaultPause, rig.FaultHangLong}})
		if len(rep.WriteAfter) == 0 {
			t.Fatal("a holder ignoring its lease context: no write after a loss was found")
		}
	})
}
