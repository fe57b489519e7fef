package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	fiberv3 "github.com/gofiber/fiber/v3"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockgate/lockgate/core"
)

// LockMode selects how the order endpoint is serialised per user and
// voucher.
type LockMode string

// Lock modes of `seckill serve -lock`.
const (
	// LockRedis locks "order:<user>:<voucher>" in Redis through the lockgate
	// adapter of the HTTP stack (see Stacks), of gRPC (grpclock) or of
	// Connect (connectlock): one order per user across all nodes.
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

// The HTTP stacks of `seckill serve -http`. Each serves the same routes
// with the same checks and answers, and with LockRedis locks the order
// route with its own lockgate adapter, in one line (lock_redis.go), on the
// same key template (OrderKeyTemplate):
const (
	// StackFiber is Fiber v2 (NewFiberApp) with middleware/fiber
	// (fiberlock).
	StackFiber = "fiber"
	// StackFiberV3 is Fiber v3 (NewFiberV3App) with middleware/fiberv3
	// (fiberlock for Fiber v3).
	StackFiberV3 = "fiberv3"
	// StackNetHTTP is net/http's ServeMux (NewHTTPHandler) with
	// middleware/nethttp (httplock).
	StackNetHTTP = "nethttp"
	// StackChi is a chi v5 router (NewChiHandler) with httplock given to
	// the route's With, as middleware/chi's doc says.
	StackChi = "chi"
	// StackGin is Gin (NewGinHandler) with middleware/gin (ginlock).
	StackGin = "gin"
	// StackEcho is Echo v4 (NewEchoHandler) with middleware/echo
	// (echolock), supported for as long as Echo v4 gets fixes (until
	// 2026-12-31).
	StackEcho = "echo"
	// StackEchoV5 is Echo v5 (NewEchoV5Handler) with middleware/echov5
	// (echolock for Echo v5).
	StackEchoV5 = "echov5"
)

// Stacks lists every HTTP stack, in the order of `seckill serve -h`.
var Stacks = []string{StackFiber, StackFiberV3, StackNetHTTP, StackChi, StackGin, StackEcho, StackEchoV5}

// ParseStack checks s against Stacks.
func ParseStack(s string) (string, error) {
	for _, st := range Stacks {
		if s == st {
			return s, nil
		}
	}
	return "", fmt.Errorf("-http %q: want one of %s", s, strings.Join(Stacks, ", "))
}

// StackServer is the server of one HTTP stack: Serve serves the
// listener until Shutdown, which stops taking connections and waits for
// the requests in flight, within ctx. An *http.Server is one.
type StackServer interface {
	Serve(ln net.Listener) error
	Shutdown(ctx context.Context) error
}

// NewStackServer returns the server of `seckill serve -http stack`: Fiber
// v2 (NewFiberApp) or v3 (NewFiberV3App), or for the net/http stacks
// (nethttp, chi, gin, echo, echov5) their handler in an http.Server with
// cfg.Timeouts, as NewHTTPServer. Each applies the four timeouts and
// refuses ambiguous framing. Errors: an unknown stack, and as
// NewFiberApp.
func NewStackServer(cfg Config, stack string) (StackServer, error) {
	netHTTP := func(handler func(Config) (http.Handler, error)) (StackServer, error) {
		srv, err := newNetHTTPServer(cfg, handler)
		if err != nil {
			return nil, err // not a nil *http.Server in a non-nil interface
		}
		return srv, nil
	}
	switch stack {
	case StackFiber:
		app, err := NewFiberApp(cfg)
		if err != nil {
			return nil, err
		}
		return fiberServer{app}, nil
	case StackFiberV3:
		app, err := NewFiberV3App(cfg)
		if err != nil {
			return nil, err
		}
		return fiberV3Server{app}, nil
	case StackNetHTTP:
		return netHTTP(NewHTTPHandler)
	case StackChi:
		return netHTTP(NewChiHandler)
	case StackGin:
		return netHTTP(NewGinHandler)
	case StackEcho:
		return netHTTP(NewEchoHandler)
	case StackEchoV5:
		return netHTTP(NewEchoV5Handler)
	}
	_, err := ParseStack(stack)
	return nil, err
}

type fiberServer struct{ app *fiber.App }

func (s fiberServer) Serve(ln net.Listener) error        { return s.app.Listener(ln) }
func (s fiberServer) Shutdown(ctx context.Context) error { return s.app.ShutdownWithContext(ctx) }

type fiberV3Server struct{ app *fiberv3.App }

func (s fiberV3Server) Serve(ln net.Listener) error {
	return s.app.Listener(ln, fiberv3.ListenConfig{DisableStartupMessage: true})
}
func (s fiberV3Server) Shutdown(ctx context.Context) error { return s.app.ShutdownWithContext(ctx) }

// Defaults of the service's Config.
const (
	DefaultWait      = 2 * time.Second  // how long a request waits for the lock (core.WithWait's budget)
	DefaultTTL       = 10 * time.Second // the lock's lease time
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
// for ever. Every HTTP stack applies all four (NewFiberApp, NewFiberV3App,
// and NewStackServer's http.Server for the net/http stacks), and so does
// the Connect server (NewConnectServer); a zero field takes its default, a
// negative one is an error.
type Timeouts struct {
	// ReadHeader bounds reading the request line and headers, from the
	// first byte of the request. Default DefaultReadHeaderTimeout (2s).
	// net/http: http.Server.ReadHeaderTimeout. Fiber (v2 and v3):
	// fiber.Config's ReadTimeout, which fasthttp arms when a request
	// starts, extended for the body once the header is in (see
	// NewFiberApp).
	ReadHeader time.Duration
	// Read bounds reading the whole request, body included; at least
	// ReadHeader. Default DefaultReadTimeout (5s).
	Read time.Duration
	// Write bounds sending the answer. Default DefaultWriteTimeout (15s).
	// net/http (http.Server.WriteTimeout: the nethttp, chi, gin, echo and
	// echov5 stacks, and Connect) counts it from the end of the request header,
	// so it covers the body, the lock wait and the handler too: it must be
	// longer than Config.Wait, or a request waiting for the lock loses its
	// connection instead of getting its 429. Fiber (fasthttp) counts it
	// from the end of the handler.
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

// Config configures the HTTP, gRPC and Connect servers of the service.
type Config struct {
	// Service is the order logic. Required.
	Service *Service
	// Mode is the lock mode. Default LockRedis.
	Mode LockMode
	// Locker is the lockgate Locker of LockRedis. Required in that mode.
	Locker *core.Locker
	// Wait is how long a request waits for a busy lock before 429 (gRPC
	// and Connect: ResourceExhausted). Default DefaultWait (2s).
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
	// Metrics, when set, is served at GET /metrics by every HTTP stack
	// (`seckill serve` gives its Prometheus handler). It runs outside any
	// lock: a scrape never waits for, nor takes, an order's lock.
	Metrics http.Handler
	// Tracer, when set, runs each order (HTTP on every stack, gRPC and
	// Connect) in a server span, the parent of its lock's span (see
	// tracing.go). Without it no span is made.
	Tracer trace.Tracer
	// Local holds the mutexes of LockLocal. Give the same one to every
	// server of a node (HTTP, gRPC, Connect; `seckill serve` does) so that
	// they lock one another out as a node's in-process lock should. nil:
	// a set of its own for each server built from this Config.
	Local *LocalLocks
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
	if c.Local == nil {
		c.Local = &LocalLocks{}
	}
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

// checkOrder is the first step of every stack's order route, before any
// lock: it reads the ids as the route hands them over (the voucher from
// the path, the user from the query) and checks that the voucher exists.
// A non-zero status is the answer — 400 naming the field, 404, or the
// store's failure — and then nothing is locked or written.
func (c Config) checkOrder(ctx context.Context, voucher, user string) (ids, int, string) {
	voucherID, err := parseID("voucher_id", voucher)
	if err != nil {
		return ids{}, http.StatusBadRequest, err.Error()
	}
	userID, err := parseID("user_id", user)
	if err != nil {
		return ids{}, http.StatusBadRequest, err.Error()
	}
	ok, err := c.Service.Store.VoucherExists(ctx, voucherID)
	if err != nil {
		code, msg := c.outcome(ctx, err)
		return ids{}, code, msg
	}
	if !ok {
		return ids{}, http.StatusNotFound, MsgUnknownVoucher
	}
	return ids{user: userID, voucher: voucherID}, 0, ""
}

// ids are the checked ids of an order request.
type ids struct{ user, voucher int64 }

// lockLocal is the lock step of LockLocal on every stack: it waits up to
// c.Wait for the in-process mutex of the order's key and returns its
// unlock, or false when the wait ended first (answered 429 with
// Retry-After: 1, gRPC and Connect ResourceExhausted).
func (c Config) lockLocal(ctx context.Context, id ids) (func(), bool) {
	ctx, cancel := context.WithTimeout(ctx, c.Wait)
	defer cancel()
	unlock, err := c.Local.Lock(ctx, OrderKey(id.user, id.voucher))
	return unlock, err == nil
}

// MsgBusy answers an order whose in-process lock (LockLocal) is still busy
// when the wait ends; the lockgate adapters answer their own.
const MsgBusy = "System busy, please try later"

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
	case errors.Is(err, ErrStaleFence), errors.Is(context.Cause(ctx), core.ErrLockLost), errors.Is(err, core.ErrLockLost):
		// The last: the write permit (Service.WriteLimit) was lost
		// and the write cancelled with it.
		return http.StatusConflict, MsgStaleFence
	case errors.Is(err, core.ErrNotObtained):
		// No write permit came free within Service.WriteWait: busy,
		// as the lock adapters answer a busy lock (orderRetryAfter).
		return http.StatusTooManyRequests, MsgBusy
	case errors.Is(err, core.ErrUnavailable):
		// Redis failed while taking the write permit.
		c.Logger.Warn("seckill: write permit unavailable", "err", err)
		return http.StatusServiceUnavailable, MsgUnavailable
	}
	c.Logger.Error("seckill: order failed", "err", err)
	return http.StatusInternalServerError, MsgInternal
}

// orderRetryAfter is the Retry-After header (whole seconds) of an order's
// error, "" for none: core's estimate for a busy write permit
// (core.RetryAfterSeconds), 1 when Redis was unavailable.
func orderRetryAfter(err error) string {
	switch {
	case errors.Is(err, core.ErrNotObtained):
		return strconv.Itoa(core.RetryAfterSeconds(err))
	case errors.Is(err, core.ErrUnavailable):
		return "1"
	}
	return ""
}

// orderReply is the body of a successful order.
type orderReply struct {
	OrderID int64 `json:"order_id"`
}

// errorReply is the body of every error.
type errorReply struct {
	Error string `json:"error"`
}
