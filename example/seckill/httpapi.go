package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

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

// Defaults of Timeouts (and of the flags of `seckill serve`).
const (
	// DefaultReadHeaderTimeout bounds the request line and headers: a few
	// hundred bytes that any live client sends at once.
	DefaultReadHeaderTimeout = 2 * time.Second
	// DefaultReadTimeout bounds the whole request, body (at most
	// BodyLimit, 1 KiB) included.
	DefaultReadTimeout = 5 * time.Second
	// DefaultWriteTimeout bounds the answer: longer than the read timeout,
	// the lock wait (DefaultWait, 2s) and the handler's work together, since
	// on net/http it runs from the end of the request header.
	DefaultWriteTimeout = 15 * time.Second
	// DefaultIdleTimeout bounds an idle keep-alive connection.
	DefaultIdleTimeout = 60 * time.Second
)

// Timeouts bound how long a client may take over each part of an HTTP
// exchange, so that a slow or idle client (slowloris: a header sent one
// byte at a time) cannot hold a connection, its goroutine and its buffers
// for ever. Both HTTP stacks apply all four (NewFiberApp, NewHTTPServer);
// a zero field takes its default, a negative one is an error.
type Timeouts struct {
	// ReadHeader bounds reading the request line and headers, from the
	// first byte of the request. Default DefaultReadHeaderTimeout (2s).
	// net/http: http.Server.ReadHeaderTimeout. Fiber: fiber.Config's
	// ReadTimeout, which fasthttp arms when a request starts, extended for
	// the body once the header is in (see NewFiberApp).
	ReadHeader time.Duration
	// Read bounds reading the whole request, body included; at least
	// ReadHeader. Default DefaultReadTimeout (5s).
	Read time.Duration
	// Write bounds sending the answer. Default DefaultWriteTimeout (15s).
	// net/http (http.Server.WriteTimeout) counts it from the end of the
	// request header, so it covers the body, the lock wait and the handler
	// too: it must be longer than Config.Wait, or a request waiting for
	// the lock loses its connection instead of getting its 429. Fiber
	// (fasthttp) counts it from the end of the handler.
	Write time.Duration
	// Idle bounds the wait for the next request on a keep-alive
	// connection. Default DefaultIdleTimeout (60s).
	Idle time.Duration
}

// withDefaults fills the zero fields and checks the others against each
// other and the lock wait.
func (t Timeouts) withDefaults(wait time.Duration) (Timeouts, error) {
	for _, f := range []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{
		{"ReadHeader", &t.ReadHeader, DefaultReadHeaderTimeout},
		{"Read", &t.Read, DefaultReadTimeout},
		{"Write", &t.Write, DefaultWriteTimeout},
		{"Idle", &t.Idle, DefaultIdleTimeout},
	} {
		if *f.d < 0 {
			return t, fmt.Errorf("seckill: Timeouts.%s %v is negative", f.name, *f.d)
		}
		if *f.d == 0 {
			*f.d = f.def
		}
	}
	if t.ReadHeader > t.Read {
		return t, fmt.Errorf("seckill: Timeouts.ReadHeader %v is longer than Timeouts.Read %v, which bounds the whole request", t.ReadHeader, t.Read)
	}
	if t.Write <= wait {
		return t, fmt.Errorf("seckill: Timeouts.Write %v must be longer than the lock wait %v (on net/http it bounds the wait and the handler too)", t.Write, wait)
	}
	return t, nil
}

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
	// Timeouts bound slow and idle HTTP clients. Zero fields take their
	// defaults (2s header, 5s request, 15s answer, 60s idle).
	Timeouts Timeouts
	// Metrics, when set, is served at GET /metrics by both HTTP stacks
	// (`seckill serve` gives its Prometheus handler). It runs outside any
	// lock: a scrape never waits for, nor takes, an order's lock.
	Metrics http.Handler
	// Tracer, when set, runs each order (HTTP on both stacks, and gRPC) in
	// a server span, the parent of its lock's span (see tracing.go).
	// Without it no span is made.
	Tracer trace.Tracer
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
	t, err := c.Timeouts.withDefaults(c.Wait)
	if err != nil {
		return c, err
	}
	c.Timeouts = t
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
