package seckill

import "errors"

// Outcomes of an order other than success. Compare with errors.Is.
var (
	// ErrAlreadyPurchased reports that the user already holds an order for
	// the voucher (HTTP 400, gRPC AlreadyExists).
	ErrAlreadyPurchased = errors.New("seckill: user has already purchased")
	// ErrOutOfStock reports that the voucher has no stock left (HTTP 400,
	// gRPC FailedPrecondition).
	ErrOutOfStock = errors.New("seckill: out of stock")
	// ErrUnknownVoucher reports a voucher id that is not in the database
	// (HTTP 404, gRPC NotFound).
	ErrUnknownVoucher = errors.New("seckill: unknown voucher")
	// ErrStaleFence reports a write carrying a fence lower than the last one
	// recorded for its lock key: the lease that guarded it was lost and a
	// newer holder already wrote (HTTP 409, gRPC Aborted). Nothing is
	// written.
	ErrStaleFence = errors.New("seckill: stale fencing token")
)

// Messages sent to clients for each outcome: the "error" field of an HTTP
// answer, the status message of a gRPC or Connect one.
const (
	MsgAlreadyPurchased = "User has already purchased"
	MsgOutOfStock       = "Out of stock"
	MsgUnknownVoucher   = "Voucher not found"
	MsgStaleFence       = "Lock lost before the write, please retry"
	MsgInternal         = "Internal server error"
	// MsgUnavailable answers an order whose write permit
	// (Service.WriteLimit) could not be taken because Redis failed (HTTP
	// 503 with Retry-After: 1, gRPC Unavailable).
	MsgUnavailable  = "Service unavailable, please retry"
	MsgBodyTooLarge = "Request body too large"
	// MsgBadFraming answers a request whose body length is ambiguous
	// (several Content-Length headers, or a Transfer-Encoding); see
	// NewFiberApp and NewHTTPHandler.
	MsgBadFraming = "Ambiguous request framing: send at most one Content-Length and no Transfer-Encoding"
)
