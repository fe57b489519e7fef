package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
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

// TestClusterACLUser: a Cluster whose nodes let in only the ACL user
// alice (their default user off) is reached with -cluster, -user and the
// password in LOCKGATE_REDIS_PASSWORD, on every master (ping) and for a
// lock on any of them (ls); a wrong password fails saying WRONGPASS.
// (t.Setenv: the package's tests do not run in parallel.)
func TestClusterACLUser(t *testing.T) {
	const password = "cluster-Vd8pL1"
	cl := redistest.StartCluster(t, 3)
	l := newLocker(t, cl.Client(t)) // before the default user is off
	for i := range 6 {
		take(t, l, fmt.Sprintf("job:%d", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range cl.Servers {
		c := redis.NewClient(s.Options())
		err := c.Do(ctx, "ACL", "SETUSER", "alice", "on", ">"+password, "~*", "&*", "+@all").Err()
		if err == nil {
			err = c.Do(ctx, "ACL", "SETUSER", "default", "off").Err()
		}
		c.Close()
		if err != nil {
			t.Fatalf("node %s: %v", s.Addr, err)
		}
	}
	args := []string{"-cluster", cl.Addrs[0], "-user", "alice", "-timeout", "3s"}

	t.Setenv(envPassword, password)
	r := mustRun(t, append(slices.Clone(args), "ping")...)
	if want := "ok: Cluster of 3 masters (seeds " + cl.Addrs[0] + "), user alice\n"; r.stdout != want {
		t.Errorf("ping printed %q, want %q", r.stdout, want)
	}
	r = mustRun(t, append(slices.Clone(args), "ls")...)
	if _, order, footer := rows(t, r.stdout); len(order) != 6 || footer != "(6 locks)" {
		t.Errorf("ls listed %q %q, want the 6 locks", order, footer)
	}

	t.Setenv(envPassword, "wrong-"+password)
	r = lockgate(t, append(slices.Clone(args), "ping")...)
	if r.code != exitFailed || !strings.Contains(r.stderr, "WRONGPASS") || strings.Contains(r.stderr, password) {
		t.Errorf("a wrong password: exit %d, stderr %q; want %d, WRONGPASS and no password", r.code, r.stderr, exitFailed)
	}
}
