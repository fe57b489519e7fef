package drivertest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockgate/lockgate/fence"
)

// Example places one order per user on SQLite under two holders of one
// lock: the first holder's lock was lost (Redis restarted empty) and the
// same user's second request took it again, with a higher fence. Whichever
// reaches the database first, the user gets one order: for user 42 the
// older holder writes first, and the newer one, checking after its Check,
// sees that order; for user 43 the newer one writes first, and the older
// one, late, is refused. (The fence record is part of the transaction: a
// holder that rolls back records nothing, and wrote nothing.)
func Example() {
	dir, err := os.MkdirTemp("", "fence-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	// IMMEDIATE transactions and a busy timeout: see the package doc of fence.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	ctx := context.Background()
	guard, err := fence.New(fence.SQLite)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := guard.CreateTable(ctx, db); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (user_id INTEGER, fence INTEGER)`); err != nil {
		fmt.Println(err)
		return
	}

	// order is the guarded check-then-insert of a holder of lock
	// "order:<user>" with its fence (lease.Key(), lease.Fence()).
	order := func(holder string, user int, f int64) {
		holder = fmt.Sprintf("user %d, %s", user, holder)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer tx.Rollback()
		if err := guard.Check(ctx, tx, fmt.Sprintf("order:%d", user), f); errors.Is(err, fence.ErrStale) {
			fmt.Println(holder+":", "refused, a newer holder has written")
			return
		} else if err != nil {
			fmt.Println(err)
			return
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM orders WHERE user_id = ?`, user).Scan(&n); err != nil {
			fmt.Println(err)
			return
		}
		if n > 0 {
			fmt.Println(holder+":", "already ordered")
			return
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (user_id, fence) VALUES (?, ?)`, user, f); err != nil {
			fmt.Println(err)
			return
		}
		if err := tx.Commit(); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(holder+":", "ordered")
	}
	order("older", 42, 1001)
	order("newer", 42, 1002)
	order("newer", 43, 1004)
	order("older", 43, 1003)
	var n int
	db.QueryRowContext(ctx, `SELECT COUNT(*) FROM orders`).Scan(&n)
	fmt.Println("orders:", n)
	// Output:
	// user 42, older: ordered
	// user 42, newer: already ordered
	// user 43, newer: ordered
	// user 43, older: refused, a newer holder has written
	// orders: 2
}
