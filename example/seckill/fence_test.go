package seckill

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/fence"
	"github.com/lockgate/lockgate/redistest"
)

// TestStaleFenceRejected: a write carrying a fence lower than the last one
// recorded for its key is rejected and writes nothing; a higher fence
// passes the fence and PlaceOrder's check then finds the user's order;
// InsertOrder (the check is the caller's) takes a higher fence as a new
// order.
func TestStaleFenceRejected(t *testing.T) {
	testStaleFence(t, openStore(t, ""))
}

func testStaleFence(t *testing.T, st *Store) {
	ctx := context.Background()
	seed(t, st, 10)
	key := OrderKey(1, testVoucher)
	if _, err := st.PlaceOrder(ctx, 1, testVoucher, key, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PlaceOrder(ctx, 1, testVoucher, key, 3); !errors.Is(err, ErrStaleFence) || !errors.Is(err, fence.ErrStale) {
		t.Fatalf("fence 3 after 7: %v, want ErrStaleFence (and fence.ErrStale)", err)
	}
	if _, err := st.InsertOrder(ctx, 1, testVoucher, key, 5); !errors.Is(err, ErrStaleFence) {
		t.Fatalf("InsertOrder, fence 5 after 7: %v, want ErrStaleFence", err)
	}
	if _, err := st.PlaceOrder(ctx, 2, testVoucher, OrderKey(2, testVoucher), 3); err != nil {
		t.Fatalf("fence 3 on another key: %v", err)
	}
	for _, f := range []int64{7, 8} {
		if _, err := st.PlaceOrder(ctx, 1, testVoucher, key, f); !errors.Is(err, ErrAlreadyPurchased) {
			t.Fatalf("PlaceOrder, fence %d after 7: %v, want ErrAlreadyPurchased (the check in the transaction)", f, err)
		}
	}
	if _, err := st.InsertOrder(ctx, 1, testVoucher, key, 8); err != nil {
		t.Fatalf("InsertOrder, fence 8 after 7: %v", err)
	}
	v, err := st.Voucher(ctx, testVoucher)
	if err != nil {
		t.Fatal(err)
	}
	if v.Orders != 3 || v.Stock != 7 {
		t.Fatalf("%+v: the refused writes must change nothing (want 3 orders, stock 7)", v)
	}
}

// TestServiceStaleLease: a lease that lost its lock to a newer holder
// that already wrote cannot write: the service records the lease's fence
// and rejects the older one.
func TestServiceStaleLease(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	locker := core.Must(core.New(client))
	defer locker.Close()
	st := openStore(t, "")
	seed(t, st, 10)
	svc := &Service{Store: st}
	ctx := context.Background()
	key := OrderKey(1, testVoucher)

	old, err := locker.Lock(ctx, key, core.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	oldFence := old.Fence()
	if err := old.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	newer, err := locker.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Unlock(ctx)
	if newer.Fence() <= oldFence {
		t.Fatalf("fences %d then %d: not increasing", oldFence, newer.Fence())
	}
	if _, err := svc.Order(newer.Context(), 1, testVoucher); err != nil {
		t.Fatal(err)
	}
	// The old holder, unaware of its loss, writes with its fence (as a
	// process paused past its lease would after waking up).
	if _, err := st.PlaceOrder(ctx, 1, testVoucher, key, oldFence); !errors.Is(err, ErrStaleFence) {
		t.Fatalf("write with the old lease's fence: %v, want ErrStaleFence", err)
	}
	var fence int64
	if err := st.DB().QueryRowContext(ctx, `SELECT fence FROM orders WHERE user_id = 1`).Scan(&fence); err != nil || fence != newer.Fence() {
		t.Fatalf("order's fence %d (%v), want the lease's %d", fence, err, newer.Fence())
	}
}

// TestReport: duplicates are orders beyond one per user, oversold orders
// beyond the initial stock.
func TestReport(t *testing.T) {
	st := openStore(t, "")
	seed(t, st, 2)
	ctx := context.Background()
	for _, u := range []int64{1, 1, 1, 2} {
		if _, err := st.DB().ExecContext(ctx, `INSERT INTO orders (user_id, voucher_id) VALUES (?, ?)`, u, testVoucher); err != nil {
			t.Fatal(err)
		}
	}
	r := report(t, st)
	if got, want := r.String(), "orders=4 duplicates=2 oversold=2"; got != want {
		t.Fatalf("report %q, want %q", got, want)
	}
	if _, err := st.Report(ctx, 999); !errors.Is(err, ErrUnknownVoucher) {
		t.Fatalf("report of unknown voucher: %v", err)
	}
}

func TestParseTargets(t *testing.T) {
	for _, bad := range []string{"", "http://10.0.0.1:80", "ftp://127.0.0.1:1", "127.0.0.1:80", "http://example.com"} {
		if _, err := ParseTargets(bad); err == nil {
			t.Errorf("ParseTargets(%q) accepted", bad)
		}
	}
	got, err := ParseTargets("http://127.0.0.1:1/, http://localhost:2")
	if err != nil || len(got) != 2 || got[0] != "http://127.0.0.1:1" {
		t.Fatalf("ParseTargets: %v %v", got, err)
	}
}

func TestLocalLocks(t *testing.T) {
	var l LocalLocks
	unlock, err := l.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Lock of a held key: %v, want DeadlineExceeded", err)
	}
	unlock()
	unlock2, err := l.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	unlock2()
	if l.Len() != 0 {
		t.Fatalf("%d entries left after all unlocks", l.Len())
	}
}
