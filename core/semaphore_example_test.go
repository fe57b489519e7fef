package core_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// At most three exports per tenant at once, across every process: each
// export holds one permit of the tenant's semaphore; a fourth caller waits
// (here: a single attempt, busy).
func ExampleLocker_Semaphore() {
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
	defer locker.Shutdown(context.Background()) // releases the permits still held

	ctx := context.Background()
	var exports []*core.Lease
	for range 3 {
		permit, err := locker.Semaphore(ctx, "export:tenant-7", 3)
		if err != nil {
			fmt.Println(err)
			return
		}
		// ... run the export with permit.Context(), passing permit.Fence() ...
		exports = append(exports, permit)
	}
	_, err = locker.Semaphore(ctx, "export:tenant-7", 3, core.WithWait(core.NoWait))
	fmt.Println("fourth export busy:", errors.Is(err, core.ErrNotObtained))

	fmt.Println("unlock:", exports[0].Unlock(ctx)) // its permit goes to the first waiter, if any
	permit, err := locker.Semaphore(ctx, "export:tenant-7", 3)
	fmt.Println("fourth export now:", err == nil, permit.Fence() > exports[2].Fence())
	// Output:
	// fourth export busy: true
	// unlock: <nil>
	// fourth export now: true true
}
