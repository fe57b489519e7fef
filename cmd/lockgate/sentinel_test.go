package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/redistest"
)

// TestSentinelFindsMaster: with -sentinel and -master, the command finds
// the master through the sentinel and sees the lock a Locker on a failover
// client holds there; ping names the master and its address.
func TestSentinelFindsMaster(t *testing.T) {
	st := redistest.StartSentinel(t)
	l := newLocker(t, st.Client(t))
	lease := take(t, l, "order:9")

	r := mustRun(t, "-sentinel", strings.Join(st.SentinelAddrs, ","), "-master", st.MasterName, "ping")
	if want := "ok: Sentinel master " + st.MasterName + " at " + st.Master.Addr + "\n"; r.stdout != want {
		t.Errorf("ping through Sentinel printed %q, want %q", r.stdout, want)
	}

	r = mustRun(t, "-sentinel", strings.Join(st.SentinelAddrs, ","), "-master", st.MasterName, "inspect", "order:9")
	got, _, _ := rows(t, r.stdout)
	checkCells(t, got["order:9"], map[string]string{"HELD": "yes", "FENCE": strconv.FormatInt(lease.Fence(), 10)})

	r = lockgate(t, "-sentinel", strings.Join(st.SentinelAddrs, ","), "-master", "no-such-master", "-timeout", "1s", "inspect", "order:9")
	if r.code != 1 || !strings.Contains(r.stderr, "unavailable") {
		t.Errorf("an unknown master: exit %d %q, want 1 and unavailable", r.code, r.stderr)
	}
}
