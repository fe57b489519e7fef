package seckill

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lockgate/lockgate/core"
)

// OrderKey is the lock name of one user's order of one voucher:
// "order:<user>:<voucher>", as the adapters' key template
// "order:{query.user_id}:{path.voucher_id}" spells it.
func OrderKey(userID, voucherID int64) string {
	return fmt.Sprintf("order:%d:%d", userID, voucherID)
}

// WriteKey is the semaphore name of the order writes of one voucher:
// "order-writes:<voucher>" (Service.WriteLimit).
func WriteKey(voucherID int64) string {
	return fmt.Sprintf("order-writes:%d", voucherID)
}

// WritePattern is the pattern (core.WithPattern) of the write permits, so
// that metrics tell them from the order locks.
const WritePattern = "order-writes:{voucher}"

// DefaultWriteLimit is `seckill serve -write-limit`'s default: at most
// that many order writes of one voucher at once across every node.
const DefaultWriteLimit = 4

// Service is the order logic of the flash sale. It takes no lock itself:
// the lock is the adapter's job (middleware, interceptor or LocalLocks)
// and the lease, when there is one, travels in ctx.
type Service struct {
	// Store is the database. Required.
	Store *Store
	// Unfenced, when set, orders under a lease as without one: the user's
	// orders are counted before the write transaction, and the lease's fence
	// only stops an older lease writing after a newer one (InsertOrder). It
	// is the control of the lost-lock scenario (`seckill serve -unfenced`,
	// the demo's chaos round): when Redis forgets a lock while its holder
	// still works, a second holder of the same user's lock places a second
	// order. Default false: the check and the insert in one transaction
	// ordered by the fence (PlaceOrder).
	Unfenced bool
	// Locker and WriteLimit, when both set (WriteLimit > 0), bound the
	// order writes of one voucher in progress at once across every node
	// sharing the Redis: under a lease (LockRedis), Order takes a permit of
	// the semaphore WriteKey(voucher) with WriteLimit permits around the
	// database write, so that a hot voucher does not take every database
	// connection of every node at once. Every node must pass the same
	// WriteLimit (core.Semaphore refuses another count while permits are
	// held). Without a lease (LockLocal, LockNone) there is no limit.
	// Default 0: no limit.
	Locker     *core.Locker
	WriteLimit int
	// WriteWait is how long an order waits for a write permit before it is
	// answered busy (429 with Retry-After, gRPC and Connect
	// ResourceExhausted), within the request's deadline. Default
	// DefaultWait. WriteTTL is a permit's TTL (renewed while the write
	// runs). Default DefaultTTL.
	WriteWait time.Duration
	WriteTTL  time.Duration
	// permitWaits counts the orders that found every write permit held
	// and waited for one (PermitWaits).
	permitWaits atomic.Int64
	// WriteProbe, when set, runs in every Order after the write permit is
	// taken (when there is one), right before the database write, with
	// the write's context; the func it returns runs when the write has
	// returned, before the permit is given back. It is instrumentation:
	// `seckill serve -count-writes` counts the writes in progress with it,
	// the tests hold writes open with it.
	WriteProbe func(ctx context.Context, userID, voucherID int64) (done func())
	// enter, when set (by tests), runs first in every Order with its
	// context: the handler's, the lease's under LockRedis.
	enter func(ctx context.Context, userID, voucherID int64)
}

// PermitWaits returns how many orders found every write permit of their
// voucher held (WriteLimit) and waited for one, since s was made.
func (s *Service) PermitWaits() int64 { return s.permitWaits.Load() }

// Order places user's order of voucher. When ctx carries a lockgate lease
// (core.FromContext: LockRedis), the order is Store.PlaceOrder with the
// lease's key and fence: the check ("has this user ordered?") and the
// insert in one transaction that takes the key's fence first, so that even
// two holders of the lock at once (the lock lost while its holder worked)
// place one order, and a stale fence is ErrStaleFence; ctx being the
// lease's context, a lock seen lost also cancels the transaction.
//
// Without a lease (LockLocal, LockNone), or with Unfenced, it is the
// single-node service's check-then-insert: count the user's orders for
// the voucher (a statement of its own); if there is one, fail with
// ErrAlreadyPurchased; else Store.InsertOrder in one transaction (with the
// lease's fence, if any, recorded and checked there). Two requests of one
// user that are not serialised by a lock both see zero orders and both
// insert: the race the lock closes.
//
// Under a lease with a WriteLimit, the write (either path) runs holding a
// permit of WriteKey(voucher): see acquireWrite.
//
// Errors: ErrAlreadyPurchased, ErrOutOfStock, ErrStaleFence, database
// errors (ErrUnknownVoucher is checked by the adapters before locking);
// under a WriteLimit also core's errors of the permit: a *core.BusyError
// (errors.Is core.ErrNotObtained) when no permit came free within
// WriteWait, core.ErrUnavailable, and an error matching core.ErrLockLost
// when the permit was lost during the write (nothing is committed then).
func (s *Service) Order(ctx context.Context, userID, voucherID int64) (int64, error) {
	if s.enter != nil {
		s.enter(ctx, userID, voucherID)
	}
	lease := core.FromContext(ctx)
	if lease != nil && s.Locker != nil && s.WriteLimit > 0 {
		permit, err := s.acquireWrite(ctx, voucherID)
		if err != nil {
			return 0, err
		}
		defer permit.Unlock(context.WithoutCancel(ctx))
		id, err := s.write(permit.Context(), userID, voucherID, lease)
		if err != nil && errors.Is(context.Cause(permit.Context()), core.ErrLockLost) && !errors.Is(context.Cause(ctx), core.ErrLockLost) {
			// The permit, not the order's lock, was lost: the
			// transaction was cancelled with it.
			return 0, fmt.Errorf("seckill: write permit of voucher %d lost: %w (%w)", voucherID, context.Cause(permit.Context()), err)
		}
		return id, err
	}
	return s.write(ctx, userID, voucherID, lease)
}

// acquireWrite takes a permit of the semaphore WriteKey(voucherID) of
// s.WriteLimit permits: a first attempt without waiting, and when every
// permit is held (counted in PermitWaits) a wait of up to s.WriteWait in
// the semaphore's FIFO queue. The permit is taken with ctx (the lease's
// context), so its Context ends when either the permit or the order's lock
// is lost.
func (s *Service) acquireWrite(ctx context.Context, voucherID int64) (*core.Lease, error) {
	wait, ttl := s.WriteWait, s.WriteTTL
	if wait <= 0 {
		wait = DefaultWait
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	key := WriteKey(voucherID)
	opts := []core.LockOption{core.WithPattern(WritePattern), core.WithTTL(ttl)}
	permit, err := s.Locker.Semaphore(ctx, key, s.WriteLimit, append(opts, core.WithWait(core.NoWait))...)
	if !errors.Is(err, core.ErrNotObtained) || ctx.Err() != nil {
		return permit, err
	}
	s.permitWaits.Add(1)
	return s.Locker.Semaphore(ctx, key, s.WriteLimit, append(opts, core.WithWait(wait))...)
}

// write is the database write of Order, with ctx bounding it (the permit's
// context under a WriteLimit, else the handler's).
func (s *Service) write(ctx context.Context, userID, voucherID int64, lease *core.Lease) (int64, error) {
	if s.WriteProbe != nil {
		defer s.WriteProbe(ctx, userID, voucherID)()
	}
	if lease != nil && !s.Unfenced {
		return s.Store.PlaceOrder(ctx, userID, voucherID, lease.Key(), lease.Fence())
	}
	n, err := s.Store.CountOrders(ctx, userID, voucherID)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		return 0, ErrAlreadyPurchased
	}
	key := OrderKey(userID, voucherID)
	var fence int64
	if lease != nil {
		fence = lease.Fence()
		key = lease.Key()
	}
	return s.Store.InsertOrder(ctx, userID, voucherID, key, fence)
}
