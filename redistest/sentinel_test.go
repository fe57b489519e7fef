package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockgate/lockgate/redistest"
)

// TestSentinelClientWritesToMaster writes through the failover client and
// finds the value on the master, then, after Sync, on the replica.
func TestSentinelClientWritesToMaster(t *testing.T) {
	st := redistest.StartSentinel(t)
	c := st.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET through the failover client: %q, %v", v, err)
	}
	if v, err := st.Master.Client(t).Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET on the master: %q, %v", v, err)
	}
	if err := st.Sync(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if v, err := st.Replica.Client(t).Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET on the replica after Sync: %q, %v", v, err)
	}
	// Control: the replica refuses writes, so the client did not write there.
	if err := st.Replica.Client(t).Set(ctx, "k2", "v", 0).Err(); err == nil {
		t.Fatal("the replica accepted a write")
	}
}

// TestSentinelFailoverClientFollows promotes the replica and checks that the
// failover client then writes to the new master.
func TestSentinelFailoverClientFollows(t *testing.T) {
	st := redistest.StartSentinel(t)
	c := st.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old := st.Master
	if err := st.Failover(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	if st.Master == old || st.Replica != old {
		t.Fatal("Failover did not swap Master and Replica")
	}
	nm := st.Master.Client(t)
	// The client learns of the switch asynchronously (sentinel Pub/Sub):
	// retry, bounded, until a write lands on the new master.
	var lastErr error
	for i := 0; i < 100; i++ {
		if lastErr = c.Set(ctx, "after", i, 0).Err(); lastErr == nil {
			if n, err := nm.Get(ctx, "after").Int(); err == nil && n == i {
				break
			}
		}
		if i == 99 {
			t.Fatalf("the failover client did not write to the new master %s: %v", st.Master.Addr, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v, err := c.Get(ctx, "before").Result(); err != nil || v != "1" {
		t.Fatalf("data written before the failover: %q, %v", v, err)
	}
}
