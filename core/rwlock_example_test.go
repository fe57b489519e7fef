package core_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// Readers of a voucher share its lock; a restock (Lock, the writer) waits
// until they leave and excludes them while it runs.
func ExampleLocker_RLock() {
	srv, err := redistest.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	locker, err := core.New(rdb)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Shutdown(context.Background())

	ctx := context.Background()
	a, err := locker.RLock(ctx, "voucher:7")
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := locker.RLock(ctx, "voucher:7") // a second reader, at the same time
	fmt.Println("second reader:", err == nil)

	_, err = locker.Lock(ctx, "voucher:7", core.WithWait(core.NoWait))
	fmt.Println("restock while read:", errors.Is(err, core.ErrNotObtained))

	a.Unlock(ctx)
	b.Unlock(ctx) // the last reader out hands the lock to the first waiting writer, if any
	restock, err := locker.Lock(ctx, "voucher:7")
	fmt.Println("restock now:", err == nil, restock.Fence() > b.Fence())
	restock.Unlock(ctx)
	// Output:
	// second reader: true
	// restock while read: true
	// restock now: true true
}
