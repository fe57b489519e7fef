package core_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// The first Lock of a new Locker on a new Cluster client succeeds within
// its budget while other masters hang: two of three masters are stopped
// (SIGSTOP), and a Lock with a 1s budget on the third master's key must be
// granted in time, six times over with a new client each (its slot map
// loaded, as after any call), both client kinds. Neither the server check (it reads the key's master) nor go-redis's
// first lookup of a command's step count (which loads COMMAND from a node it
// picks, under a mutex) may reach a stopped master (the client's read
// timeout: 2s). Controls: check-any-node (the check reads a node the client
// picks) and cmd-info (the step count is looked up), each failing some of
// the twelve for want of an answer, not for a Cluster marked down.
func TestFirstClusterLockBesideHungMasters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, mutants string }{
		{"fixed", ""},
		{"control-check-any-node", "check-any-node"},
		{"control-cmd-info", "cmd-info"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cl := redistest.StartCluster(t, 3)
			live := cl.Servers[2]
			name := namesPerNode(t, cl, cl.Client(t), "cold", 1)[live][0]
			var failures []string
			for try := range 6 {
				for _, ctxTimeout := range []bool{false, true} {
					o := cl.Options()
					o.ContextTimeoutEnabled = ctxTimeout
					s, took, closeAll, err := lockBesideHungMasters(t, cl, o, name, time.Second, core.WithMutants(tc.mutants))
					if err == nil {
						err = s.Unlock(locktest.Context(t))
					}
					if err != nil && strings.Contains(err.Error(), "CLUSTERDOWN") {
						t.Fatalf("try %d: %v: the stopped masters were marked failed, the scenario broke", try, err)
					}
					if err != nil || took > time.Second+budgetSlack {
						failures = append(failures, fmt.Sprintf("try %d, ContextTimeoutEnabled %v: %v in %v", try, ctxTimeout, err, took))
					}
					closeAll()
				}
			}
			if tc.mutants != "" {
				if len(failures) == 0 {
					t.Fatal("control: every first Lock was granted in time; the test cannot tell")
				}
				t.Logf("control: %d of 12 failed, first: %s", len(failures), failures[0])
				return
			}
			if len(failures) > 0 {
				t.Fatalf("%d of 12 first Locks beside two stopped masters failed: %v", len(failures), failures)
			}
		})
	}
}

// lockBesideHungMasters makes a Cluster client of o (read timeout 2s: a
// stopped node is waited for that long) with its slot map loaded but not
// go-redis's command cache, and a Locker on it; stops the first two of cl's
// three masters; and Locks name with budget. It resumes the masters, and
// lets the Cluster heal after a long stop (the live master may have found
// itself in a minority long enough to refuse: CLUSTERDOWN), before it
// returns the Lock's lease, how long it took, what closes the Locker and the
// client, and the Lock's error.
func lockBesideHungMasters(t *testing.T, cl *redistest.Cluster, o *redis.ClusterOptions, name string, budget time.Duration, opts ...core.Option) (*core.Lease, time.Duration, func(), error) {
	t.Helper()
	o.ReadTimeout = 2 * time.Second
	c := redis.NewClusterClient(o)
	if err := c.ForEachMaster(locktest.Context(t), func(context.Context, *redis.Client) error { return nil }); err != nil {
		t.Fatal(err)
	}
	l, err := core.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cl.Servers[:2] {
		if err := s.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	s, err := l.Lock(locktest.Context(t), name, core.WithWait(budget))
	took := time.Since(start)
	for _, s := range cl.Servers[:2] {
		s.Resume()
	}
	if took > redistest.ClusterNodeTimeout/2 {
		if err := cl.WaitReady(20 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return s, took, func() { l.Close(); c.Close() }, err
}
