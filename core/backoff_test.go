package core_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// scriptCalls is how many EVALSHA commands srv has seen, run or rejected
// (a read-only server rejects a write script before it runs).
func scriptCalls(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			if k == "calls" || k == "rejected_calls" {
				x, _ := strconv.Atoi(v)
				n += x
			}
		}
	}
	return n
}

// readOnly makes the server behind c refuse writes (READONLY: a replica of
// a master that is not there) until the test ends. Safe from any goroutine.
func readOnly(t *testing.T, c *redis.Client) {
	t.Helper()
	if err := c.Do(context.Background(), "replicaof", "127.0.0.1", "1").Err(); err != nil {
		t.Error(err)
	}
	t.Cleanup(func() { c.Do(context.Background(), "replicaof", "no", "one") })
}

// A queued waiter whose attempts fail (a server turned read-only) backs off
// as failures go on, also once the holder's TTL as it last saw it has run
// out: before, it retried every millisecond from then on. The server turns
// read-only once the waiter is queued (it has seen the holder's TTL).
// Control: retry-at-expiry.
func TestFailingWaiterBacksOffPastTheHoldersExpiry(t *testing.T) {
	t.Parallel()
	fixedAndControl(t, "retry-at-expiry", func(t *testing.T, control bool, opts []core.Option) {
		srv := redistest.Start(t)
		holder, direct := locktest.NewLocker(t, srv)
		waiter, _ := locktest.NewLocker(t, srv, opts...)
		ctx := locktest.Context(t)
		if _, err := holder.Lock(ctx, "backoff", core.WithTTL(time.Second), core.WithoutWatchdog()); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := waiter.Lock(ctx, "backoff", core.WithTTL(30*time.Second), core.WithWait(4*time.Second))
			done <- err
		}()
		waitQueuedOn(t, direct, locktest.RedisKey("backoff"), 1)
		before := scriptCalls(t, direct)
		readOnly(t, direct)
		if err := <-done; err == nil {
			t.Fatal("Lock on a read-only server succeeded")
		}
		n := scriptCalls(t, direct) - before
		t.Logf("%d scripts after the server turned read-only", n)
		// Fixed: 25ms doubling up to 10s, about 8 in the 3s past the
		// holder's expiry. Control: a round trip at a time, 400 and more on
		// a quiet machine, about 70 on one loaded by a whole CI run.
		// One bound for both: the control must break it.
		switch {
		case control && n <= 20:
			t.Fatalf("control: %d scripts, within the fixed code's bound of 20: the millisecond retries past the holder's expiry did not show", n)
		case !control && n > 20:
			t.Fatalf("%d scripts in a 4s budget, want a backoff (25ms doubling: about 8, at most 20)", n)
		}
	})
}

// A Redlock waiter that too few nodes answer (two of three read-only)
// backs off as failures go on: before, it tried again every 1–11ms, each
// time under a new owner whose grants it gives back in the background.
// Control: no-redlock-backoff.
func TestRedlockFailingNodesBackOff(t *testing.T) {
	t.Parallel()
	fixedAndControl(t, "no-redlock-backoff", func(t *testing.T, control bool, opts []core.Option) {
		srvs := redistest.StartN(t, 3)
		// The waiter reaches the node that stays writable through a
		// proxy, which counts its acquire scripts there (its give-backs
		// are release scripts, not counted).
		proxy := redistest.StartProxy(t, srvs[2].Addr)
		mk := func(addrs []string, opts ...core.Option) (*core.Locker, []*redis.Client) {
			var cs []redis.UniversalClient
			var raw []*redis.Client
			for _, a := range addrs {
				c := redis.NewClient(&redis.Options{Addr: a})
				t.Cleanup(func() { c.Close() })
				cs = append(cs, c)
				raw = append(raw, c)
			}
			l, err := core.NewRedlock(cs, opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l, raw
		}
		holder, direct := mk([]string{srvs[0].Addr, srvs[1].Addr, srvs[2].Addr})
		waiter, _ := mk([]string{srvs[0].Addr, srvs[1].Addr, proxy.Addr}, opts...)
		ctx := locktest.Context(t)
		if _, err := holder.Lock(ctx, "rl-backoff", core.WithTTL(30*time.Second)); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(100*time.Millisecond, func() {
			readOnly(t, direct[0])
			readOnly(t, direct[1])
		})
		acquires := proxy.Watch(script(t, "acquire", "rl-backoff"))
		_, err := waiter.Lock(ctx, "rl-backoff", core.WithTTL(3*time.Second), core.WithWait(4*time.Second))
		if err == nil {
			t.Fatal("Lock with two of three nodes read-only succeeded")
		}
		n := acquires.Count()
		t.Logf("%d attempts on the node that answers, in the 4s budget: %v", n, err)
		// Fixed: from the first failure (at the 1s refresh) 25ms doubling
		// up to 250ms, with 1–11ms of jitter, about 15. Control: every
		// 1–11ms, hundreds on a quiet machine.
		// One bound for both: the control must break it (with a whole CI
		// run beside it, 37 attempts).
		switch {
		case control && n <= 25:
			t.Fatalf("control: %d attempts, within the fixed code's bound of 25: the 1–11ms retries did not show", n)
		case !control && n > 25:
			t.Fatalf("%d attempts in a 4s budget, want a backoff (about 15, at most 25)", n)
		}
	})
}
