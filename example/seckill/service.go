package seckill

import (
	"context"
	"fmt"

	"github.com/lockgate/lockgate/core"
)

// OrderKey is the lock name of one user's order of one voucher:
// "order:<user>:<voucher>", as the adapters' key template
// "order:{query.user_id}:{path.voucher_id}" spells it.
func OrderKey(userID, voucherID int64) string {
	return fmt.Sprintf("order:%d:%d", userID, voucherID)
}

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
	// enter, when set (by tests), runs first in every Order with its
	// context: the handler's, the lease's under LockRedis.
	enter func(ctx context.Context, userID, voucherID int64)
}

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
// Errors: ErrAlreadyPurchased, ErrOutOfStock, ErrStaleFence, database
// errors (ErrUnknownVoucher is checked by the adapters before locking).
func (s *Service) Order(ctx context.Context, userID, voucherID int64) (int64, error) {
	if s.enter != nil {
		s.enter(ctx, userID, voucherID)
	}
	lease := core.FromContext(ctx)
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
