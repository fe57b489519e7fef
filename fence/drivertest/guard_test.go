package drivertest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lockgate/lockgate/fence"
)

// TestStale: a fence lower than the highest recorded for its resource is
// refused with a *StaleError naming both (errors.Is ErrStale) and the
// transaction writes nothing; an equal or higher one passes; resources are
// independent. Control: the same writes without Check keep the stale one.
func TestStale(t *testing.T) {
	forEachDB(t, func(t *testing.T, d *database) {
		ctx := context.Background()
		write := func(resource string, f int64, guarded bool) error {
			tx, err := d.db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if guarded {
				if err := d.guard.Check(ctx, tx, resource, f); err != nil {
					return err
				}
			}
			if err := d.insert(tx, resource, f); err != nil {
				return err
			}
			return tx.Commit()
		}
		if err := write("r", 7, true); err != nil {
			t.Fatal(err)
		}
		err := write("r", 3, true)
		var stale *fence.StaleError
		if !errors.Is(err, fence.ErrStale) || !errors.As(err, &stale) || stale.Resource != "r" || stale.Fence != 3 || stale.Highest != 7 {
			t.Fatalf("fence 3 after 7: %v, want a *StaleError {r 3 7}", err)
		}
		for _, w := range []struct {
			resource string
			fence    int64
		}{{"r", 7}, {"other", 3}, {"r", 8}} {
			if err := write(w.resource, w.fence, true); err != nil {
				t.Fatalf("fence %d on %s: %v", w.fence, w.resource, err)
			}
		}
		if got := d.items(t, "r"); !slices.Equal(got, []int64{7, 7, 8}) {
			t.Fatalf("items of r: %v, want [7 7 8] (the stale write left out)", got)
		}
		// Control.
		if err := write("c", 7, false); err != nil {
			t.Fatal(err)
		}
		if err := write("c", 3, false); err != nil {
			t.Fatal(err)
		}
		if got := d.items(t, "c"); !slices.Equal(got, []int64{7, 3}) {
			t.Fatalf("control: %v, want the stale write kept without the guard", got)
		}
	})
}

// TestNewerFirst: the newer holder checks first and holds its transaction
// open; the older one's Check waits for it (PostgreSQL, MariaDB: observed
// waiting on the row) and, once the newer one commits, fails with a
// *StaleError, so the older one never writes after the newer one; nor when
// it begins after the newer one's commit. Control: without Check the older
// one's write lands after the newer one's.
func TestNewerFirst(t *testing.T) {
	forEachDB(t, func(t *testing.T, d *database) {
		run := func(resource string, guarded bool) ([]int64, error) {
			ctx := context.Background()
			newer := d.begin(t, nil)
			if newer == nil {
				t.FailNow()
			}
			defer newer.Rollback()
			if guarded {
				if err := d.guard.Check(ctx, newer, resource, 20); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.insert(newer, resource, 20); err != nil {
				t.Fatal(err)
			}
			older := make(chan error, 1)
			go func() {
				tx := d.begin(t, nil) // SQLite: waits here for the write lock
				if tx == nil {
					older <- errors.New("begin failed")
					return
				}
				defer tx.Rollback()
				if guarded {
					if err := d.guard.Check(ctx, tx, resource, 10); err != nil {
						older <- err
						return
					}
				}
				if err := d.insert(tx, resource, 10); err != nil {
					older <- err
					return
				}
				older <- tx.Commit()
			}()
			if guarded {
				d.waitBlocked(t, 1)
			}
			if err := newer.Commit(); err != nil {
				t.Fatal(err)
			}
			err := <-older
			return d.items(t, resource), err
		}
		got, err := run("waited", true)
		if !errors.Is(err, fence.ErrStale) || !slices.Equal(got, []int64{20}) {
			t.Fatalf("older after newer, waiting: %v, items %v; want ErrStale and [20]", err, got)
		}
		// The older one begins after the newer one's commit.
		ctx := context.Background()
		tx := d.begin(t, nil)
		if err := d.guard.Check(ctx, tx, "waited", 15); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("older after the newer's commit: %v, want ErrStale", err)
		}
		tx.Rollback()

		got, err = run("control", false)
		if err != nil || !slices.Equal(got, []int64{20, 10}) {
			t.Fatalf("control: %v, items %v; want the older write after the newer one ([20 10])", err, got)
		}
	})
}

// TestOlderFirst is the lost lock's case: the older holder is
// inside its transaction, past Check, when the newer one (its lock taken
// after the first one's was lost) arrives. The newer one's Check waits
// until the older one commits, and its check after Check sees the older
// one's item: one item, no duplicate. Control: the newer one's check made
// before its transaction (the example's old check-then-insert) reads 0
// while the older one is still open, and both insert.
func TestOlderFirst(t *testing.T) {
	forEachDB(t, func(t *testing.T, d *database) {
		run := func(resource string, checkOutside bool) []int64 {
			ctx := context.Background()
			older := d.begin(t, nil)
			if older == nil {
				t.FailNow()
			}
			defer older.Rollback()
			if err := d.guard.Check(ctx, older, resource, 10); err != nil {
				t.Fatal(err)
			}
			seen := -1
			if checkOutside {
				seen = d.count(t, d.db, resource) // the older one has not committed
			}
			newer := make(chan error, 1)
			go func() {
				tx := d.begin(t, nil)
				if tx == nil {
					newer <- errors.New("begin failed")
					return
				}
				defer tx.Rollback()
				if err := d.guard.Check(ctx, tx, resource, 20); err != nil {
					newer <- err
					return
				}
				n := seen
				if !checkOutside {
					n = d.count(t, tx, resource)
				}
				if n > 0 {
					newer <- nil // already there: nothing to insert
					return
				}
				if err := d.insert(tx, resource, 20); err != nil {
					newer <- err
					return
				}
				newer <- tx.Commit()
			}()
			d.waitBlocked(t, 1)
			if n := d.count(t, older, resource); n != 0 {
				t.Fatalf("the older one sees %d items", n)
			}
			if err := d.insert(older, resource, 10); err != nil {
				t.Fatal(err)
			}
			if err := older.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := <-newer; err != nil {
				t.Fatalf("the newer one: %v", err)
			}
			return d.items(t, resource)
		}
		if got := run("scenario", false); !slices.Equal(got, []int64{10}) {
			t.Fatalf("check after Check: items %v, want [10] (the newer one saw the older one's item)", got)
		}
		if got := run("control", true); !slices.Equal(got, []int64{10, 20}) {
			t.Fatalf("control, check before the transaction: items %v, want the duplicate [10 20]", got)
		}
	})
}

// TestRace: 30 resources, each written by two transactions with fences
// f and f+1 started at once in random order, each a check-then-insert after
// Check (retried on a serialization failure, a deadlock or a busy SQLite).
// Every resource ends with exactly one item, and the loser is the older
// one refused (ErrStale) or the newer one that saw the older one's item.
// Control: the same pairs checking before their transaction, both checks
// done before either inserts: every resource gets two items.
func TestRace(t *testing.T) {
	const pairs = 30
	forEachDB(t, func(t *testing.T, d *database) {
		ctx := context.Background()
		base := time.Now().UnixMicro()
		type outcome int
		const (
			wrote outcome = iota
			stale
			already
		)
		attempt := func(resource string, f int64) (outcome, error) {
			tx, err := d.db.BeginTx(ctx, nil)
			if err != nil {
				return 0, err
			}
			defer tx.Rollback()
			if err := d.guard.Check(ctx, tx, resource, f); errors.Is(err, fence.ErrStale) {
				return stale, nil
			} else if err != nil {
				return 0, err
			}
			var n int
			if err := tx.QueryRowContext(ctx, d.q(`SELECT COUNT(*) FROM items WHERE resource = ?`), resource).Scan(&n); err != nil {
				return 0, err
			}
			if n > 0 {
				return already, nil
			}
			if err := d.insert(tx, resource, f); err != nil {
				return 0, err
			}
			return wrote, tx.Commit()
		}
		var mu sync.Mutex
		outcomes := map[string]map[int64]outcome{} // filled before any goroutine reads it
		for i := range pairs {
			outcomes[fmt.Sprintf("race:%d", i)] = map[int64]outcome{}
		}
		retries := 0
		var wg sync.WaitGroup
		for i := range pairs {
			resource := fmt.Sprintf("race:%d", i)
			fences := []int64{base + int64(2*i), base + int64(2*i) + 1}
			rand.Shuffle(2, func(a, b int) { fences[a], fences[b] = fences[b], fences[a] })
			for _, f := range fences {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for try := 0; ; try++ {
						o, err := attempt(resource, f)
						if err != nil && retryable(err) && try < 10 {
							mu.Lock()
							retries++
							mu.Unlock()
							continue
						}
						if err != nil {
							t.Errorf("%s fence %d: %v", resource, f, err)
							return
						}
						mu.Lock()
						outcomes[resource][f] = o
						mu.Unlock()
						return
					}
				}()
			}
		}
		wg.Wait()
		var olderRefused, newerSaw int
		for i := range pairs {
			resource := fmt.Sprintf("race:%d", i)
			old, nw := base+int64(2*i), base+int64(2*i)+1
			items := d.items(t, resource)
			o := outcomes[resource]
			switch {
			case len(items) == 1 && items[0] == nw && o[nw] == wrote && o[old] == stale:
				olderRefused++
			case len(items) == 1 && items[0] == old && o[old] == wrote && o[nw] == already:
				newerSaw++
			default:
				t.Errorf("%s: items %v, outcomes older %v newer %v", resource, items, o[old], o[nw])
			}
		}
		t.Logf("%s: %d pairs: the older refused %d, the newer saw the older's item %d; %d retries", d.name, pairs, olderRefused, newerSaw, retries)

		// Control.
		var both sync.WaitGroup
		both.Add(2 * pairs)
		for i := range pairs {
			resource := fmt.Sprintf("control:%d", i)
			for _, f := range []int64{base + int64(2*i), base + int64(2*i) + 1} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var n int
					err := d.db.QueryRowContext(ctx, d.q(`SELECT COUNT(*) FROM items WHERE resource = ?`), resource).Scan(&n)
					both.Done()
					both.Wait() // both checks made before either inserts
					if err != nil || n > 0 {
						t.Errorf("control %s: %d items, %v", resource, n, err)
						return
					}
					for try := 0; ; try++ {
						tx, err := d.db.BeginTx(ctx, nil)
						if err == nil {
							if err = d.guard.Check(ctx, tx, resource, f); err == nil {
								if err = d.insert(tx, resource, f); err == nil {
									err = tx.Commit()
								}
							}
							tx.Rollback()
						}
						if err != nil && retryable(err) && try < 10 {
							continue
						}
						if err != nil && !errors.Is(err, fence.ErrStale) {
							t.Errorf("control %s: %v", resource, err)
						}
						return
					}
				}()
			}
		}
		wg.Wait()
		dups := 0
		for i := range pairs {
			dups += len(d.items(t, fmt.Sprintf("control:%d", i))) - 1
		}
		t.Logf("%s: control (the check before the transaction): %d duplicates of %d pairs", d.name, dups, pairs)
		if dups == 0 {
			t.Fatal("control: no duplicate; the test above proves nothing")
		}
	})
}

// TestReadBeforeCheck checks the package doc's rules for a newer holder
// whose transaction read before its Check, the older holder's transaction
// open past its own Check and committing its item while the newer one
// waits:
//
//   - PostgreSQL READ COMMITTED: the newer one's check after Check sees
//     the item all the same (a snapshot per statement); under REPEATABLE
//     READ its Check fails with a serialization failure (40001).
//   - MariaDB REPEATABLE READ: a plain read before Check fixes the
//     snapshot, and the plain check after Check misses the item (the
//     duplicate the doc warns of: the control of this rule); a locking
//     read (LOCK IN SHARE MODE) sees it.
//   - SQLite, a DEFERRED transaction: Check fails with SQLITE_BUSY (the
//     snapshot is not the latest), nothing written.
func TestReadBeforeCheck(t *testing.T) {
	// newer runs the newer holder: begin (opts), a plain read, Check, then
	// check reads the items; it returns what check saw or the error.
	type result struct {
		seen int
		err  error
	}
	scenario := func(t *testing.T, d *database, db *sql.DB, resource string, opts *sql.TxOptions, check string) result {
		ctx := context.Background()
		older := d.begin(t, nil)
		if older == nil {
			t.FailNow()
		}
		defer older.Rollback()
		if err := d.guard.Check(ctx, older, resource, 10); err != nil {
			t.Fatal(err)
		}
		read := make(chan struct{})
		out := make(chan result, 1)
		go func() {
			tx, err := db.BeginTx(ctx, opts)
			if err != nil {
				close(read)
				out <- result{err: err}
				return
			}
			defer tx.Rollback()
			var n int
			err = tx.QueryRowContext(ctx, d.q(`SELECT COUNT(*) FROM items WHERE resource = ?`), resource).Scan(&n)
			close(read)
			if err != nil {
				out <- result{err: err}
				return
			}
			if err := d.guard.Check(ctx, tx, resource, 20); err != nil {
				out <- result{err: err}
				return
			}
			err = tx.QueryRowContext(ctx, d.q(check), resource).Scan(&n)
			out <- result{seen: n, err: err}
		}()
		<-read
		if d.guard.Dialect() != fence.SQLite {
			d.waitBlocked(t, 1)
		}
		if err := d.insert(older, resource, 10); err != nil {
			t.Fatal(err)
		}
		if err := older.Commit(); err != nil {
			t.Fatal(err)
		}
		return <-out
	}
	const plain = `SELECT COUNT(*) FROM items WHERE resource = ?`
	forEachDB(t, func(t *testing.T, d *database) {
		switch d.guard.Dialect() {
		case fence.Postgres:
			if r := scenario(t, d, d.db, "rc", nil, plain); r.err != nil || r.seen != 1 {
				t.Fatalf("READ COMMITTED: saw %d (%v), want the older item", r.seen, r.err)
			}
			r := scenario(t, d, d.db, "rr", &sql.TxOptions{Isolation: sql.LevelRepeatableRead}, plain)
			var pg *pgconn.PgError
			if !errors.As(r.err, &pg) || pg.Code != "40001" {
				t.Fatalf("REPEATABLE READ: saw %d (%v), want Check to fail with 40001", r.seen, r.err)
			}
			t.Logf("REPEATABLE READ: %v", r.err)
		case fence.MySQL:
			if r := scenario(t, d, d.db, "plain", nil, plain); r.err != nil || r.seen != 0 {
				t.Fatalf("control, a plain read before Check: saw %d (%v), want 0 (the old snapshot)", r.seen, r.err)
			}
			if r := scenario(t, d, d.db, "locking", nil, plain+` LOCK IN SHARE MODE`); r.err != nil || r.seen != 1 {
				t.Fatalf("a locking read after Check: saw %d (%v), want the older item", r.seen, r.err)
			}
		case fence.SQLite:
			deferred, err := sql.Open("sqlite", strings.Replace(sqliteDSN(d.path), "&_txlock=immediate", "", 1))
			if err != nil {
				t.Fatal(err)
			}
			defer deferred.Close()
			r := scenario(t, d, deferred, "deferred", nil, plain)
			if !sqliteBusy(r.err) { // SQLITE_BUSY, or SQLITE_BUSY_SNAPSHOT on a loaded machine
				t.Fatalf("DEFERRED: saw %d (%v), want Check to fail with SQLITE_BUSY", r.seen, r.err)
			}
			t.Logf("DEFERRED: %v", r.err)
		}
	})
}
