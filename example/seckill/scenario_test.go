package seckill

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lockgate/lockgate/redistest"
)

// The scenario at CI size: 3 nodes sharing one SQLite file (and
// one Redis), 40 users each sending 4 concurrent duplicate orders
// round-robin over the nodes, stock larger than the users so that only
// the one-order-per-user rule limits orders.
const (
	scenarioNodes = 3
	scenarioUsers = 40
	scenarioDup   = 4
	scenarioStock = 100
)

// TestScenarioRedisLock: with the lockgate lock every user gets exactly
// one order across the nodes, none is oversold, and each order carries its
// lease's fence. Run on every HTTP stack.
func TestScenarioRedisLock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, stack := range Stacks {
		t.Run(stack, func(t *testing.T) {
			dsn := filepath.Join(t.TempDir(), "seckill.db")
			st := openStore(t, dsn)
			seed(t, st, scenarioStock)
			targets := startNodes(t, scenarioNodes, dsn, nodeOpts{mode: LockRedis, redis: srv, http: stack})
			res := load(t, targets, scenarioUsers, scenarioDup)
			r := report(t, st)
			t.Logf("redis/%s: %v", stack, r)
			if r.Duplicates != 0 || r.Oversold != 0 {
				t.Fatalf("redis lock: %v, want 0 duplicates and 0 oversold", r)
			}
			if r.Orders != scenarioUsers || res.OK != scenarioUsers {
				t.Fatalf("redis lock: %d orders, %d answered 200, want %d (one per user)", r.Orders, res.OK, scenarioUsers)
			}
			if res.ServerErrors != 0 || res.Failed != 0 {
				t.Fatalf("redis lock: %d 5xx, %d failed", res.ServerErrors, res.Failed)
			}
			var unfenced int
			if err := st.DB().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM orders WHERE fence <= 0`).Scan(&unfenced); err != nil {
				t.Fatal(err)
			}
			if unfenced != 0 {
				t.Fatalf("%d orders without the lease's fence", unfenced)
			}
		})
	}
}

// TestScenarioNoLockDuplicates is the control: the same load without a
// lock produces duplicates on the default store, so the redis test above
// could fail. The race is real (the count runs before the write
// transaction) but not certain at this size: up to 3 runs, fresh data
// each time.
func TestScenarioNoLockDuplicates(t *testing.T) {
	for _, mode := range []LockMode{LockNone, LockLocal} {
		t.Run(string(mode), func(t *testing.T) {
			var last Report
			for attempt := 1; attempt <= 3; attempt++ {
				dsn := filepath.Join(t.TempDir(), "seckill.db")
				st := openStore(t, dsn)
				seed(t, st, scenarioStock)
				targets := startNodes(t, scenarioNodes, dsn, nodeOpts{mode: mode})
				load(t, targets, scenarioUsers, scenarioDup)
				last = report(t, st)
				t.Logf("%s attempt %d: %v", mode, attempt, last)
				if last.Oversold != 0 {
					t.Fatalf("oversold %d: the conditional decrement must never oversell", last.Oversold)
				}
				if last.Duplicates > 0 {
					return
				}
			}
			t.Fatalf("-lock %s across %d nodes: no duplicates in 3 runs (%v); the race the lock must prevent did not show", mode, scenarioNodes, last)
		})
	}
}

// TestLocalLockOneNode: the in-process lock is enough on a single node.
func TestLocalLockOneNode(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "seckill.db")
	st := openStore(t, dsn)
	seed(t, st, scenarioStock)
	targets := startNodes(t, 1, dsn, nodeOpts{mode: LockLocal})
	load(t, targets, scenarioUsers, scenarioDup)
	if r := report(t, st); r.Duplicates != 0 || r.Orders != scenarioUsers {
		t.Fatalf("local lock on one node: %v, want %d orders and no duplicates", r, scenarioUsers)
	}
}

// TestUniqueIndexBackstop: with -unique-index the database rejects the
// duplicates that the missing lock lets through (answered as already
// purchased, not as errors).
func TestUniqueIndexBackstop(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "seckill.db")
	st := openStore(t, dsn)
	if err := st.EnsureUniqueIndex(context.Background()); err != nil {
		t.Fatal(err)
	}
	seed(t, st, scenarioStock)
	targets := startNodes(t, scenarioNodes, dsn, nodeOpts{mode: LockNone})
	res := load(t, targets, scenarioUsers, scenarioDup)
	if r := report(t, st); r.Duplicates != 0 || r.Orders != scenarioUsers {
		t.Fatalf("unique index: %v, want %d orders and no duplicates", r, scenarioUsers)
	}
	if res.ServerErrors != 0 || res.Already != scenarioUsers*(scenarioDup-1) {
		t.Fatalf("unique index: %d 5xx, %d already purchased, want 0 and %d", res.ServerErrors, res.Already, scenarioUsers*(scenarioDup-1))
	}
}
