package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/lockgate/lockgate/redistest"
)

// TestClusterListsEveryMaster: on a real 3-master Cluster, 20 locks whose
// slots fall on all three masters are all listed by ls, exactly and
// sorted (SCAN on every master, no duplicates); inspect finds one through
// the slot's master; ls -limit 5 prints 5 rows and says the limit was
// reached.
func TestClusterListsEveryMaster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	l := newLocker(t, cc)

	var keys []string
	fences := map[string]int64{}
	masters := map[string]bool{}
	for i := range 20 {
		key := fmt.Sprintf("job:%02d", i)
		keys = append(keys, key)
		fences[key] = take(t, l, key).Fence()
		slot, err := cc.ClusterKeySlot(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		masters[cl.ServerForSlot(int(slot)).Addr] = true
	}
	if len(masters) != 3 {
		t.Fatalf("the 20 keys fall on %d masters, want 3 (the test needs keys on every master)", len(masters))
	}
	addrs := cl.Addrs[0] + "," + cl.Addrs[1] // the third is discovered

	r := mustRun(t, "-cluster", addrs, "ls")
	got, order, footer := rows(t, r.stdout)
	if !slices.Equal(order, keys) {
		t.Fatalf("ls listed %q, want %q", order, keys)
	}
	for _, key := range keys {
		checkCells(t, got[key], map[string]string{"HELD": "yes", "FENCE": strconv.FormatInt(fences[key], 10)})
	}
	if footer != "(20 locks)" {
		t.Errorf("footer %q, want (20 locks)", footer)
	}

	r = mustRun(t, "-cluster", addrs, "inspect", "job:13")
	got, _, _ = rows(t, r.stdout)
	checkCells(t, got["job:13"], map[string]string{"HELD": "yes", "FENCE": strconv.FormatInt(fences["job:13"], 10), "WAITERS": "0"})

	r = mustRun(t, "-cluster", addrs, "ls", "-limit", "5", "job:*")
	_, order, footer = rows(t, r.stdout)
	if len(order) != 5 || !slices.IsSorted(order) {
		t.Errorf("ls -limit 5 listed %q, want 5 sorted rows", order)
	}
	for _, key := range order {
		if fences[key] == 0 {
			t.Errorf("ls -limit 5 listed %q, not one of the locks", key)
		}
	}
	if footer != "(5 locks; limit reached)" {
		t.Errorf("footer %q, want (5 locks; limit reached)", footer)
	}
}
