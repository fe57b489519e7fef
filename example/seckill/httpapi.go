package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/lockgate/lockgate/core"
)

// LockMode selects how the order endpoint is serialised per user and
// voucher.
type LockMode string

// Lock modes of `seckill serve -lock`.
const (
	// LockRedis locks "order:<user>:<voucher>" in Redis through the lockgate
	// adapter of the HTTP framework (fiberlock, nethttp) or gRPC (grpclock):
	// one order per user across all nodes.
	LockRedis LockMode = "redis"
	// LockLocal locks an in-process mutex per key (LocalLocks): safe on one
	// node, not across nodes.
	LockLocal LockMode = "local"
	// LockNone takes no lock.
	LockNone LockMode = "none"
)

// ParseLockMode checks s against the lock modes.
func ParseLockMode(s string) (LockMode, error) {
	switch m := LockMode(s); m {
	case LockRedis, LockLocal, LockNone:
		return m, nil
	}
	return "", fmt.Errorf("-lock %q: want redis, local or none", s)
}

// Defaults of the service's Config.
const (
	DefaultWait      = 2 * time.Second  // the seed's blocking_timeout
	DefaultTTL       = 10 * time.Second // the seed's timeout
	DefaultBodyLimit = 1024             // bytes; the order endpoint takes no body
)

// Config configures the HTTP and gRPC servers of the service.
type Config struct {
	// Service is the order logic. Required.
	Service *Service
	// Mode is the lock mode. Default LockRedis.
	Mode LockMode
	// Locker is the lockgate Locker of LockRedis. Required in that mode.
	Locker *core.Locker
	// Wait is how long a request waits for a busy lock before 429 (gRPC
	// ResourceExhausted). Default DefaultWait (2s).
	Wait time.Duration
	// TTL is the lease time of a lock (renewed while the handler runs).
	// Default DefaultTTL (10s).
	TTL time.Duration
	// BodyLimit is the largest request body accepted; larger is 413.
	// Default DefaultBodyLimit (1 KiB).
	BodyLimit int
	// Logger receives internal errors, which are never sent to clients.
	// Default slog.Default().
	Logger *slog.Logger
	// local holds the mutexes of LockLocal.
	local *LocalLocks
	// orderKey replaces OrderKeyTemplate in tests.
	orderKey string
}

func (c Config) withDefaults() (Config, error) {
	if c.Service == nil || c.Service.Store == nil {
		return c, errors.New("seckill: Config.Service with a Store is required")
	}
	if c.Mode == "" {
		c.Mode = LockRedis
	}
	if _, err := ParseLockMode(string(c.Mode)); err != nil {
		return c, err
	}
	if c.Mode == LockRedis && c.Locker == nil {
		return c, errors.New("seckill: Config.Locker is required with LockRedis")
	}
	if c.Wait <= 0 {
		c.Wait = DefaultWait
	}
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	if c.BodyLimit <= 0 {
		c.BodyLimit = DefaultBodyLimit
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.local = &LocalLocks{}
	return c, nil
}

// parseID reads a positive integer id; the error names the field.
func parseID(field, s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("%s is required", field)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s must be a positive integer", field)
	}
	return n, nil
}

// outcome maps the result of Service.Order (or a local lock) to an HTTP
// status and client message. Internal errors are logged, never sent.
func (c Config) outcome(ctx context.Context, err error) (int, string) {
	switch {
	case errors.Is(err, ErrAlreadyPurchased):
		return http.StatusBadRequest, MsgAlreadyPurchased
	case errors.Is(err, ErrOutOfStock):
		return http.StatusBadRequest, MsgOutOfStock
	case errors.Is(err, ErrUnknownVoucher):
		return http.StatusNotFound, MsgUnknownVoucher
	case errors.Is(err, ErrStaleFence), errors.Is(context.Cause(ctx), core.ErrLockLost):
		return http.StatusConflict, MsgStaleFence
	}
	c.Logger.Error("seckill: order failed", "err", err)
	return http.StatusInternalServerError, MsgInternal
}

// orderReply is the body of a successful order.
type orderReply struct {
	OrderID int64 `json:"order_id"`
}

// errorReply is the body of every error.
type errorReply struct {
	Error string `json:"error"`
}
