package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// WithReplicaAck on a real master with a replica and a sentinel (the
// Locker on the sentinel's failover client): a grant is on the replica when
// Lock returns; with the replica stopped (SIGSTOP) Lock fails with
// ErrNotReplicated within its budget and leaves nothing held, and renewals
// that no replica acknowledges lose the lease, whose lock is then given back
// on the master. Controls: a Locker without
// the option, on the same paused replica, obtains its lock and keeps its
// lease — the master itself is healthy.
func TestReplicaAck(t *testing.T) {
	t.Parallel()
	sen := redistest.StartSentinel(t)
	acked := locktest.Locker(t, sen.Client(t), core.WithReplicaAck(1, 300*time.Millisecond))
	plain := locktest.Locker(t, sen.Client(t))
	master, replica := sen.Master.Client(t), sen.Replica.Client(t)
	ctx := locktest.Context(t)
	waitReplicaAcks(t, master)
	locktest.Warm(t, acked)
	locktest.Warm(t, plain)

	t.Run("grant on the replica", func(t *testing.T) {
		s, err := acked.Lock(ctx, "ra:grant")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Unlock(ctx)
		if got := ownerIn(ctx, replica, "lockgate:{ra:grant}"); got == "" || got != ownerIn(ctx, master, "lockgate:{ra:grant}") {
			t.Fatalf("replica's owner %q right after Lock, want the master's", got)
		}
	})

	t.Run("granted waiter", func(t *testing.T) {
		s, err := plain.Lock(ctx, "ra:handed", core.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		res := waitFor(ctx, acked, "ra:handed", 5*time.Second)
		waitQueued(t, master, "ra:handed", 1)
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		checkWoken(t, res, "ra:handed")
	})

	t.Run("replica stopped", func(t *testing.T) {
		if err := sen.Replica.Pause(); err != nil {
			t.Fatal(err)
		}
		defer sen.Replica.Resume()
		start := time.Now()
		_, err := acked.Lock(ctx, "ra:stopped", core.WithWait(time.Second))
		took := time.Since(start)
		if !errors.Is(err, core.ErrNotReplicated) || !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrNotObtained) {
			t.Fatalf("Lock with the replica stopped = %v, want ErrNotReplicated (an ErrUnavailable)", err)
		}
		if took > time.Second+budgetSlack {
			t.Fatalf("Lock took %v with a 1s budget", took)
		}
		for i := 0; master.Exists(ctx, "lockgate:{ra:stopped}").Val() == 1; i++ {
			if i == 100 {
				t.Fatal("the unacknowledged grant is still held on the master 5s later")
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Control: the master grants a Locker that does not ask for
		// acknowledgement.
		s, err := plain.Lock(ctx, "ra:stopped-plain", core.WithWait(time.Second))
		if err != nil {
			t.Fatalf("control without acknowledgement: %v", err)
		}
		s.Unlock(ctx)
	})

	t.Run("renewals not acknowledged", func(t *testing.T) {
		const ttl = 1500 * time.Millisecond
		a, err := acked.Lock(ctx, "ra:renew", core.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		defer a.Unlock(ctx)
		p, err := plain.Lock(ctx, "ra:renew-plain", core.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Unlock(ctx)
		if err := sen.Replica.Pause(); err != nil {
			t.Fatal(err)
		}
		defer sen.Replica.Resume()
		select {
		case <-a.Done():
			if !errors.Is(context.Cause(a.Context()), core.ErrLockLost) {
				t.Fatalf("lease ended with %v, want ErrLockLost", context.Cause(a.Context()))
			}
		case <-time.After(3 * ttl):
			t.Fatalf("lease whose renewals no replica acknowledged still live after %v", 3*ttl)
		}
		select {
		case <-p.Done():
			t.Fatalf("control: the lease of a Locker without acknowledgement was lost: %v", context.Cause(p.Context()))
		default:
		}
		// The unacknowledged renewals extended the lock on the master (by
		// a TTL from each); the lost lease gives it back at once instead.
		lost := time.Now()
		for master.Exists(ctx, "lockgate:{ra:renew}").Val() == 1 {
			if time.Since(lost) > 700*time.Millisecond {
				t.Fatalf("the lost lease's lock is still on the master %v after the loss (PTTL %v)", time.Since(lost), master.PTTL(ctx, "lockgate:{ra:renew}").Val())
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// WithReplicaAck's arguments are checked by New.
func TestReplicaAckRejects(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, opt := range []core.Option{core.WithReplicaAck(0, time.Second), core.WithReplicaAck(1, 0), core.WithReplicaAck(1, time.Microsecond)} {
		if _, err := core.New(c, opt); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("New with a bad WithReplicaAck = %v, want ErrInvalid", err)
		}
	}
	if _, err := core.New(c, core.WithReplicaAck(1, time.Millisecond)); err != nil {
		t.Errorf("New with WithReplicaAck(1, 1ms) = %v", err)
	}
}

// waitReplicaAcks waits (bounded, 10s) until the master's replica
// acknowledges writes: right after a full sync it acknowledges nothing until
// its first REPLCONF ACK, up to a second later (what a Redisson user sees as
// "0 replicas synced" while a replica re-syncs; here WithReplicaAck fails
// with ErrNotReplicated meanwhile).
func waitReplicaAcks(t *testing.T, master *redis.Client) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		master.Set(ctx, "ack-probe", i, 0)
		if n, _ := master.Do(ctx, "wait", 1, 200).Int64(); n >= 1 {
			return
		}
	}
	t.Fatal("the replica acknowledged no write within 10s")
}

// WithReplicaAck on a real Cluster whose masters have a replica each: the
// script and WAIT go to the key's master, the grant is on that master's
// replica when Lock returns, and with that replica stopped Lock fails with
// ErrNotReplicated. Control: a Locker without the option obtains the same
// lock meanwhile.
func TestReplicaAckOnCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	if err := cl.AddReplicas(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	c := cl.Client(t)
	acked := locktest.Locker(t, c, core.WithReplicaAck(1, 300*time.Millisecond))
	plain := locktest.Locker(t, cl.Client(t))
	ctx := locktest.Context(t)
	hash := "lockgate:{rac:k}"
	slot := int(c.ClusterKeySlot(ctx, hash).Val())
	i := -1
	for n, s := range cl.Servers {
		if s == cl.ServerForSlot(slot) {
			i = n
		}
	}
	if i < 0 {
		t.Fatal("no master serves the key's slot")
	}
	master := redis.NewClient(&redis.Options{Addr: cl.Servers[i].Addr})
	defer master.Close()
	waitReplicaAcks(t, master)
	replica := redis.NewClient(&redis.Options{Addr: cl.Replicas[i].Addr, PoolSize: 1, OnConnect: func(ctx context.Context, cn *redis.Conn) error {
		return cn.ReadOnly(ctx).Err()
	}})
	defer replica.Close()

	s, err := acked.Lock(ctx, "rac:k")
	if err != nil {
		t.Fatal(err)
	}
	if got := ownerIn(ctx, replica, hash); got == "" || got != ownerIn(ctx, master, hash) {
		t.Fatalf("replica's owner %q right after Lock, want the master's", got)
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.Replicas[i].Pause(); err != nil {
		t.Fatal(err)
	}
	defer cl.Replicas[i].Resume()
	if _, err := acked.Lock(ctx, "rac:k", core.WithWait(time.Second)); !errors.Is(err, core.ErrNotReplicated) {
		t.Fatalf("Lock with the key's replica stopped = %v, want ErrNotReplicated", err)
	}
	p, err := plain.Lock(ctx, "rac:k", core.WithWait(2*time.Second))
	if err != nil {
		t.Fatalf("control without acknowledgement: %v", err)
	}
	p.Unlock(ctx)
}
