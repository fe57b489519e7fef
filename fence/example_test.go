package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/fence"
	"github.com/lockgate/lockgate/redistest"
)

// ExampleGuard places an order under a lease: the fence first, then the
// check, then the insert, in one transaction (db is a PostgreSQL database
// opened with a driver of your choice; the fence/drivertest module runs
// this on PostgreSQL, SQLite and MariaDB).
func ExampleGuard() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://127.0.0.1:5432/shop")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	guard, err := fence.New(fence.Postgres)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := guard.CreateTable(ctx, db); err != nil { // or guard.DDL() in a migration
		fmt.Println(err)
		return
	}
	locker := core.Must(core.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})))
	defer locker.Close()

	lease, err := locker.Lock(ctx, "order:42:7")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Unlock(ctx)
	// The lease's context: the transaction ends if the lock is seen lost.
	wctx := lease.Context()
	tx, err := db.BeginTx(wctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Rollback()
	if err := guard.Check(wctx, tx, lease.Key(), lease.Fence()); errors.Is(err, fence.ErrStale) {
		fmt.Println("lock lost: a newer holder has written")
		return
	} else if err != nil {
		fmt.Println(err)
		return
	}
	var n int
	if err := tx.QueryRowContext(wctx, `SELECT COUNT(*) FROM orders WHERE user_id = $1 AND voucher_id = $2`, 42, 7).Scan(&n); err != nil {
		fmt.Println(err)
		return
	}
	if n > 0 {
		fmt.Println("already ordered")
		return
	}
	if _, err := tx.ExecContext(wctx, `INSERT INTO orders (user_id, voucher_id, fence) VALUES ($1, $2, $3)`, 42, 7, lease.Fence()); err != nil {
		fmt.Println(err)
		return
	}
	if err := tx.Commit(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ordered")
}

// ExampleScript sets a value in Redis under a lease: a holder whose lock
// was lost and taken by another (here: given the older fence) writes
// nothing.
func ExampleScript() {
	srv, err := redistest.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	rdb := redis.NewClient(srv.Options())
	defer rdb.Close()
	ctx := context.Background()

	set := fence.NewScript(`return redis.call('SET', KEYS[1], ARGV[1])`)
	// The resource is the lock's name; the data key shares its hash tag
	// (fence.Key("order:42") is "lockgate:fence:{order:42}").
	fmt.Println(set.Run(ctx, rdb, "order:42", 1002, []string{"{order:42}:status"}, "paid by the newer holder").Err())
	err = set.Run(ctx, rdb, "order:42", 1001, []string{"{order:42}:status"}, "paid by the older holder").Err()
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Println("refused: fence", stale.Fence, "after", stale.Highest)
	}
	fmt.Println(rdb.Get(ctx, "{order:42}:status").Val())
	// Output:
	// <nil>
	// refused: fence 1001 after 1002
	// paid by the newer holder
}
