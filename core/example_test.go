package core_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// One person, one order: the critical section runs under a lock named after
// the user and the voucher, on whichever node the request lands.
func Example() {
	srv, err := redistest.NewServer() // a throwaway redis-server; use your own address
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	locker := core.New(rdb, core.WithTTL(10*time.Second), core.WithWait(2*time.Second))
	defer locker.Close()

	ctx := context.Background()
	lease, err := locker.Lock(ctx, "order:42:7")
	switch {
	case errors.Is(err, core.ErrNotObtained):
		retry, _ := core.RetryAfter(err)
		fmt.Println("busy, retry after", retry) // HTTP 429
		return
	case errors.Is(err, core.ErrUnavailable):
		fmt.Println("lock service down") // HTTP 503
		return
	case err != nil:
		fmt.Println(err)
		return
	}
	defer lease.Unlock(context.WithoutCancel(ctx))

	// The lease's context is cancelled if the lock is lost; pass it (and the
	// fence) to the work the lock protects.
	fmt.Println("locked", lease.Key(), "fence > 0:", lease.Fence() > 0)

	// Nested code that locks the same key with the lease's context
	// re-enters instead of waiting for itself.
	inner, err := locker.Lock(lease.Context(), "order:42:7")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("re-entered:", inner.Reentrant(), "same fence:", inner.Fence() == lease.Fence())
	inner.Unlock(ctx)

	// Another owner cannot have it meanwhile.
	_, err = locker.TryLock(ctx, "order:42:7")
	fmt.Println("other owner:", errors.Is(err, core.ErrNotObtained))
	// Output:
	// locked order:42:7 fence > 0: true
	// re-entered: true same fence: true
	// other owner: true
}

// A holder that must not act after losing its lock watches the lease's
// context; context.Cause tells a release from a loss.
func ExampleLease_Context() {
	srv, err := redistest.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	locker := core.New(rdb)
	defer locker.Close()

	ctx := context.Background()
	lease, err := locker.Lock(ctx, "report", core.WithTTL(100*time.Millisecond), core.WithoutWatchdog())
	if err != nil {
		fmt.Println(err)
		return
	}
	<-lease.Context().Done() // a fixed lease ends at its validity
	fmt.Println(errors.Is(context.Cause(lease.Context()), core.ErrLockLost))
	// Output: true
}
