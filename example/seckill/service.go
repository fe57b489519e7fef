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
	// enter, when set (by tests), runs first in every Order with its
	// context: the handler's, the lease's under LockRedis.
	enter func(ctx context.Context, userID, voucherID int64)
}

// Order places user's order of voucher, as a single-node service does: count the user's
// orders for the voucher (its own statement); if there is one, fail with
// ErrAlreadyPurchased; else PlaceOrder in one transaction. When ctx carries
// a lockgate lease (core.FromContext), the order records the lease's fence
// and the write is rejected with ErrStaleFence if a newer lease of the same
// key already wrote; ctx being the lease's context, a lost lock also
// cancels the transaction. Without a lease the fence is 0 and not checked.
// Errors: ErrAlreadyPurchased, ErrOutOfStock, ErrStaleFence, database
// errors (ErrUnknownVoucher is checked by the adapters before locking).
func (s *Service) Order(ctx context.Context, userID, voucherID int64) (int64, error) {
	if s.enter != nil {
		s.enter(ctx, userID, voucherID)
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
	if lease := core.FromContext(ctx); lease != nil {
		fence = lease.Fence()
		key = lease.Key()
	}
	return s.Store.PlaceOrder(ctx, userID, voucherID, key, fence)
}
