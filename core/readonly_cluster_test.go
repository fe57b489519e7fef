package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// A Cluster client that reads from replicas (ReadOnly; RouteByLatency and
// RouteRandomly set it too) looks every command up in its cache of
// COMMAND's reply before sending it, loading that cache on first use from a
// node it picks, under a mutex and a 5s context of its own. Even with
// ContextTimeoutEnabled it cannot be trusted to bound a call by the call's
// deadline, so lockgate bounds it from a goroutine of its own: the first
// Lock of a new Locker on such a client, with two of three masters stopped,
// ends within its 1s budget, eight times over with a new client each:
// granted when go-redis's lookup went to the live master first, else
// unavailable at the budget's end (not at once: the lookup was waited for),
// which must happen at least once (it picks a node at random: 2 in 3).
// Control: trust-readonly, which leaves the call to the client; a first
// lookup that reaches a stopped master then holds the Lock for the client's
// 2s read timeout or more.
func TestReadOnlyClusterClientKeepsBudget(t *testing.T) {
	t.Parallel()
	fixedAndControl(t, "trust-readonly", func(t *testing.T, control bool, opts []core.Option) {
		cl := redistest.StartCluster(t, 3)
		live := cl.Servers[2]
		name := namesPerNode(t, cl, cl.Client(t), "readonly", 1)[live][0]
		const tries, budget = 8, time.Second
		var late []string
		hung := 0
		for try := range tries {
			o := cl.Options()
			o.ContextTimeoutEnabled = true
			o.ReadOnly = true
			s, took, closeAll, err := lockBesideHungMasters(t, cl, o, name, budget, opts...)
			switch {
			case err == nil:
				if err := s.Unlock(locktest.Context(t)); err != nil {
					t.Fatal(err)
				}
			case !errors.Is(err, core.ErrUnavailable):
				t.Fatalf("try %d: %v, want a grant or ErrUnavailable", try, err)
			case took < budget/2:
				t.Fatalf("try %d: unavailable after %v, before the lookup could have been waited for", try, took)
			default:
				hung++
			}
			if took > budget+budgetSlack {
				late = append(late, fmt.Sprintf("try %d: %v after %v", try, err, took))
			}
			closeAll()
		}
		if control {
			if len(late) == 0 {
				t.Fatal("control: every first Lock ended within its budget; the test cannot tell")
			}
			t.Logf("control: %d of %d past the budget, first: %s", len(late), tries, late[0])
			return
		}
		if len(late) > 0 {
			t.Fatalf("%d of %d first Locks on a ReadOnly client ran past their budget: %v", len(late), tries, late)
		}
		if hung == 0 {
			t.Fatal("every lookup went to the live master first; the test cannot tell")
		}
		t.Logf("%d of %d unavailable at the budget's end (the lookup hung), the rest granted", hung, tries)
	})
}

// On a Cluster client that reads from replicas (ReadOnly), the wait room's
// check after a new subscription (who holds the lock now: it may have been
// granted before the subscription) reads the lock's master. A replica may
// not have the latest grant yet, and a waiter granted the lock would then
// sleep until its queue refresh. On a 3-master Cluster with a replica each,
// a Lock waits behind another Locker's hold: the check's HGET must reach
// the lock's master and no replica. Control: check-replica, which sends the
// check through the client, to the slot's replica.
func TestReadOnlyClusterWaitChecksMaster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	if err := cl.AddReplicas(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	fixedAndControl(t, "check-replica", func(t *testing.T, control bool, opts []core.Option) {
		name := "roc:" + t.Name()
		hash := "lockgate:{" + name + "}"
		holder := locktest.Locker(t, cl.Client(t))
		ctx := locktest.Context(t)
		s, err := holder.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		o := cl.Options()
		o.ReadOnly = true
		c := redis.NewClusterClient(o)
		t.Cleanup(func() { c.Close() })
		asked := make(chan string, 16) // the nodes the check's HGET went to
		c.OnNewNode(func(n *redis.Client) { n.AddHook(hgetHook{addr: n.Options().Addr, key: hash, asked: asked}) })
		master, err := c.MasterForKey(ctx, hash)
		if err != nil {
			t.Fatal(err)
		}
		// The client's slot map must name the slot's replica, which a map read
		// soon after the replica joined may not yet do: nothing signals it, so
		// read the map again (ForEachSlave reloads it before it returns).
		replica := ""
		for end := time.Now().Add(10 * time.Second); replica == "" && time.Now().Before(end); {
			if err := c.ForEachSlave(ctx, func(context.Context, *redis.Client) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if r, err := c.SlaveForKey(ctx, hash); err == nil && r.Options().Addr != master.Options().Addr {
				replica = r.Options().Addr
			}
		}
		if replica == "" {
			t.Fatal("the client's slot map names no replica of the lock's slot within 10s")
		}
		waiter := locktest.Locker(t, c, opts...)
		done := make(chan error, 1)
		go func() {
			w, err := waiter.Lock(ctx, name, core.WithWait(10*time.Second))
			if err == nil {
				err = w.Unlock(ctx)
			}
			done <- err
		}()
		var node string
		select {
		case node = <-asked:
		case <-time.After(5 * time.Second):
			t.Fatal("no check read the lock's holder within 5s of the waiter's subscription")
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if control {
			if node != replica {
				t.Fatalf("control: the check read %s, not the replica %s; the test cannot tell", node, replica)
			}
			t.Logf("control: the check read the replica %s, not the master %s", node, master.Options().Addr)
			return
		}
		if node != master.Options().Addr {
			t.Fatalf("the check read the lock's holder from %s, want its master %s", node, master.Options().Addr)
		}
	})
}

// hgetHook tells asked the node address of each HGET of key in a pipeline.
type hgetHook struct {
	addr  string
	key   string
	asked chan<- string
}

func (h hgetHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h hgetHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h hgetHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if a := c.Args(); len(a) > 1 && c.Name() == "hget" && a[1] == h.key {
				select {
				case h.asked <- h.addr:
				default:
				}
			}
		}
		return next(ctx, cmds)
	}
}
