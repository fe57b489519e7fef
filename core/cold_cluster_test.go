package core_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// The first Lock of a new Locker on a new Cluster client succeeds within
// its budget while other masters hang: two of three masters are stopped
// (SIGSTOP), and a Lock with a 300ms budget on the third master's key must
// be granted in time, six times over with a new client each, both client
// kinds. Neither the server check (it reads the key's master) nor go-redis's
// first lookup of a command's step count (which loads COMMAND from a node it
// picks, under a mutex) may reach a stopped master. Controls:
// check-any-node (the check reads a node the client picks) and cmd-info
// (the step count is looked up), each failing some of the six.
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
					o.ReadTimeout = 2 * time.Second // a stopped node is waited for that long
					c := redis.NewClusterClient(o)
					// the slot map loaded, COMMAND not
					if err := c.ForEachMaster(locktest.Context(t), func(context.Context, *redis.Client) error { return nil }); err != nil {
						t.Fatal(err)
					}
					l, err := core.New(c, core.WithMutants(tc.mutants))
					if err != nil {
						t.Fatal(err)
					}
					for _, s := range cl.Servers[:2] {
						if err := s.Pause(); err != nil {
							t.Fatal(err)
						}
					}
					start := time.Now()
					s, err := l.Lock(locktest.Context(t), name, core.WithWait(300*time.Millisecond))
					took := time.Since(start)
					for _, s := range cl.Servers[:2] {
						s.Resume()
					}
					if err == nil {
						err = s.Unlock(locktest.Context(t))
					}
					if err != nil || took > 300*time.Millisecond+budgetSlack {
						failures = append(failures, fmt.Sprintf("try %d, ContextTimeoutEnabled %v: %v in %v", try, ctxTimeout, err, took))
					}
					l.Close()
					c.Close()
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
