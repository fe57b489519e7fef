package seckill

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/lockgate/lockgate/fence"
)

// PlaceOrder places user's order of voucher under a lease of lockKey with
// fence, in one transaction ordered by the fence (fence.Guard):
//
//  1. the fence is recorded as the highest seen for lockKey, or the order
//     fails with ErrStaleFence (a newer lease of the key has written);
//     from here the transaction holds the key's fence row (PostgreSQL: the
//     row lock, until it ends; SQLite: the database's write lock, taken at
//     BEGIN IMMEDIATE), so the orders of one key go one at a time;
//  2. the user's orders of the voucher are counted, in the transaction:
//     one already is ErrAlreadyPurchased — a transaction that waited in 1
//     for another one of the same key reads after that one's commit
//     (PostgreSQL READ COMMITTED: a snapshot per statement; SQLite: the
//     writer reads the latest);
//  3. one is taken from the voucher's stock with an atomic conditional
//     decrement (ErrOutOfStock when none is left) and the order is
//     inserted, carrying fence.
//
// So two holders of one lock at once — the first one's lock lost when
// Redis restarted empty or was flushed — place one order whichever reaches
// the database first: the older one after the newer one is refused, the
// newer one after the older one finds its order. It returns the new
// order's id. With the unique index in place a second order of the user
// fails with ErrAlreadyPurchased too. Nothing is written on any error.
// Errors: ErrStaleFence (also errors.Is fence.ErrStale),
// ErrAlreadyPurchased, ErrOutOfStock, the database's; a fence <= 0 is an
// error (an order without a lease goes through InsertOrder).
func (s *Store) PlaceOrder(ctx context.Context, userID, voucherID int64, lockKey string, fence int64) (int64, error) {
	return s.order(ctx, userID, voucherID, lockKey, fence, true)
}

// InsertOrder is the "insert" of a check-then-insert whose check the
// caller made before (CountOrders, outside the transaction): in one
// transaction, when fence > 0 it records fence as the highest seen for
// lockKey (ErrStaleFence if a higher one is recorded), takes one from the
// stock (ErrOutOfStock) and inserts the order carrying fence. The check
// being outside, a newer lease writing after an older one is not stopped:
// the order path of LockLocal and LockNone, and of Service.Unfenced, the
// control of the lost-lock scenario. It returns the new order's id;
// nothing is written on any error.
func (s *Store) InsertOrder(ctx context.Context, userID, voucherID int64, lockKey string, fence int64) (int64, error) {
	return s.order(ctx, userID, voucherID, lockKey, fence, false)
}

// CountOrders returns how many orders user holds for voucher. It runs as a
// statement of its own, outside any write transaction: the "check" of the
// single-node service's check-then-insert (see InsertOrder).
func (s *Store) CountOrders(ctx context.Context, userID, voucherID int64) (int64, error) {
	return s.countOrders(ctx, s.db, userID, voucherID)
}

func (s *Store) countOrders(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, userID, voucherID int64) (int64, error) {
	var n int64
	err := q.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM orders WHERE user_id = ? AND voucher_id = ?`), userID, voucherID).Scan(&n)
	return n, err
}

// order is PlaceOrder (check set: the count in the transaction, after the
// fence) and InsertOrder.
func (s *Store) order(ctx context.Context, userID, voucherID int64, lockKey string, f int64, check bool) (int64, error) {
	if check && f <= 0 {
		return 0, fmt.Errorf("seckill: PlaceOrder needs a lease's fence, got %d", f)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if f > 0 {
		if err := s.guard.Check(ctx, tx, lockKey, f); errors.Is(err, fence.ErrStale) {
			return 0, fmt.Errorf("%w: %w", ErrStaleFence, err)
		} else if err != nil {
			return 0, err
		}
	}
	if check {
		n, err := s.countOrders(ctx, tx, userID, voucherID)
		if err != nil {
			return 0, err
		}
		if n > 0 {
			return 0, ErrAlreadyPurchased
		}
	}
	res, err := tx.ExecContext(ctx, s.q(`UPDATE vouchers SET stock = stock - 1 WHERE id = ? AND stock > 0`), voucherID)
	if err != nil {
		return 0, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, err
	} else if n == 0 {
		return 0, ErrOutOfStock
	}
	var id int64
	err = tx.QueryRowContext(ctx, s.q(`INSERT INTO orders (user_id, voucher_id, fence) VALUES (?, ?, ?) RETURNING id`), userID, voucherID, f).Scan(&id)
	if isUniqueViolation(err) {
		return 0, ErrAlreadyPurchased
	}
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		if isUniqueViolation(err) {
			return 0, ErrAlreadyPurchased
		}
		return 0, err
	}
	return id, nil
}
