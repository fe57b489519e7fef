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
	locker, err := core.New(rdb, core.WithTTL(10*time.Second), core.WithWait(2*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Shutdown(context.Background()) // releases what is still held

	err = placeOrder(context.Background(), locker, 42, 7)
	fmt.Println("ordered:", err == nil)
	// Output:
	// locked order:42:7 fence > 0: true
	// other owner busy: true
	// ordered: true
}

// placeOrder checks "has this user ordered?", takes stock and inserts the
// order, all under the lock of (user, voucher).
func placeOrder(ctx context.Context, locker *core.Locker, user, voucher int64) error {
	lease, err := locker.Lock(ctx, fmt.Sprintf("order:%d:%d", user, voucher))
	if err != nil {
		// Never run the work without the lock; errors.Is tells busy
		// (core.ErrNotObtained) from Redis down (core.ErrUnavailable).
		return err
	}
	defer lease.Unlock(ctx) // detached from ctx's cancellation; safe to retry

	// The lease's context is cancelled if the lock is lost: pass it, and
	// the fence, to the work the lock protects.
	fmt.Println("locked", lease.Key(), "fence > 0:", lease.Fence() > 0)

	// Another owner cannot have it meanwhile.
	_, err = locker.TryLock(ctx, lease.Key())
	fmt.Println("other owner busy:", errors.Is(err, core.ErrNotObtained))
	return nil
}

// Nested code that locks the same key with the lease's context re-enters
// instead of waiting for itself: same fence, and only the outer Unlock
// releases the lock.
func ExampleLocker_Lock_reentry() {
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
	lease, err := locker.Lock(ctx, "order:42:7")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Unlock(ctx)

	inner, err := locker.Lock(lease.Context(), lease.Key())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("re-entered:", inner.Reentrant(), "same fence:", inner.Fence() == lease.Fence())
	if err := inner.Unlock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.TryLock(ctx, lease.Key())
	fmt.Println("still held after the inner Unlock:", errors.Is(err, core.ErrNotObtained))
	// Output:
	// re-entered: true same fence: true
	// still held after the inner Unlock: true
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
	locker, err := core.New(rdb)
	if err != nil {
		fmt.Println(err)
		return
	}
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

// An operator looks at a lock without taking it.
func ExampleLocker_Inspect() {
	srv, err := redistest.NewServer() // a throwaway redis-server; use your own address
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
	lease, err := locker.Lock(ctx, "order:42:7", core.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Unlock(ctx)
	info, err := locker.Inspect(ctx, "order:42:7")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held:", info.Held, "same fence:", info.Fence == lease.Fence(), "TTL about 10s:", info.TTL > 9*time.Second)
	names, _ := locker.List(ctx, "order:*", 10)
	fmt.Println("locks:", names)
	// Output:
	// held: true same fence: true TTL about 10s: true
	// locks: [order:42:7]
}

// LockMulti takes several locks at once, or none: here a transfer of stock
// between two vouchers holds both for its whole duration. Callers that
// name the same vouchers in the other order do not deadlock with it.
func ExampleLocker_LockMulti() {
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
	lease, err := locker.LockMulti(ctx, []string{"voucher:9", "voucher:7"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("holding:", lease.Keys())
	// ... move stock from voucher 9 to voucher 7, passing lease.Fence() ...

	_, err = locker.TryLock(core.NewOwner(ctx), "voucher:7")
	fmt.Println("another owner busy:", errors.Is(err, core.ErrNotObtained))
	fmt.Println("unlock:", lease.Unlock(ctx))
	// Output:
	// holding: [voucher:7 voucher:9]
	// another owner busy: true
	// unlock: <nil>
}

// A Locker on a Sentinel failover client, told the sentinels' addresses so
// that a deployment whose sentinels all refuse connections is reported at
// once, naming them. (Not run: it needs a Sentinel deployment.)
func ExampleWithSentinelAddrs() {
	opts := &redis.FailoverOptions{
		MasterName:    "mymaster",
		SentinelAddrs: []string{"127.0.0.1:26379", "127.0.0.1:26380", "127.0.0.1:26381"},
	}
	rdb := redis.NewFailoverClient(opts)
	defer rdb.Close()
	locker, err := core.New(rdb, core.WithSentinelAddrs(opts.SentinelAddrs...))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
}
