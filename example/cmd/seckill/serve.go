package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/example/seckill"
)

type serveFlags struct {
	addr, grpcAddr, connectAddr, redisURL, dsn, lock, httpImpl string
	wait, ttl                                                  time.Duration
	writeLimit                                                 int
	countWrites                                                bool
	uniqueIndex                                                bool
	unfenced                                                   bool
	traceStdout                                                bool
	// timeouts are the HTTP server's (-read-header-timeout, -read-timeout,
	// -write-timeout, -idle-timeout).
	timeouts seckill.Timeouts
}

// serveFlagSet returns the flag set of `seckill serve` and the flags it
// fills.
func serveFlagSet() (*flag.FlagSet, *serveFlags) {
	fs := newFlags("serve", `Run one node of the flash-sale service:
  POST /voucher-order/seckill/{voucher_id}?user_id=N  → 200 {"order_id": N}, 400 already purchased /
       out of stock / bad id, 404 unknown voucher, 429 busy (Retry-After), 503 lock service down, 413 body
  GET  /vouchers/{voucher_id}                         → {"id": N, "stock": N, "orders": N}
  GET  /metrics                                       → lockgate's OpenTelemetry metrics, Prometheus text format
       (no lock taken; labelled by the lock's key template, never by a user id)
  gRPC seckill.v1.Seckill/Order on -grpc-addr (with server reflection)
  Connect seckill.v1.Seckill/Order on -connect-addr (the Connect, gRPC and gRPC-Web protocols; HTTP/1.1
       and h2c), locked like gRPC from the same proto annotation
Several nodes may share one -db and one -redis.

The HTTP stacks (-http) serve the same routes with the same answers, and with -lock redis lock the order
route with their own lockgate adapter, on the same key template:
  fiber    Fiber v2, middleware/fiber
  fiberv3  Fiber v3, middleware/fiberv3
  nethttp  net/http's ServeMux, middleware/nethttp
  chi      a chi v5 router, middleware/nethttp given to the route's With
  gin      Gin, middleware/gin
  echo     Echo v4, middleware/echo (supported for as long as Echo v4 gets fixes, until 2026-12-31)
  echov5   Echo v5, middleware/echov5
Every stack bounds slow and idle clients with the four -*-timeout flags (a client past the header or
request timeout is disconnected: a header sent one byte at a time no longer holds a connection), and
refuses ambiguous framing (several Content-Length headers, or a Transfer-Encoding) with 400 (net/http:
501 for a Transfer-Encoding it does not know), closing the connection.`)
	f := &serveFlags{}
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "HTTP listen address")
	fs.StringVar(&f.grpcAddr, "grpc-addr", "127.0.0.1:9090", "gRPC listen address; empty disables gRPC")
	fs.StringVar(&f.connectAddr, "connect-addr", "", "Connect listen address (HTTP/1.1 and h2c), e.g. 127.0.0.1:9091 (port 0: any free\nport, logged); empty (the default) disables Connect")
	fs.StringVar(&f.redisURL, "redis", "redis://127.0.0.1:6379/0", "Redis URL of the lock service (used with -lock redis)")
	fs.StringVar(&f.dsn, "db", dbDefault, dbUsage)
	fs.StringVar(&f.lock, "lock", "redis", "lock per user and voucher: redis (lockgate, across nodes), local (in-process mutex,\none node only), none")
	fs.StringVar(&f.httpImpl, "http", seckill.StackFiber, "HTTP stack: "+strings.Join(seckill.Stacks, ", ")+"; each locks the order route with its\nown lockgate adapter")
	fs.DurationVar(&f.wait, "wait", seckill.DefaultWait, "how long a request waits for a busy lock before 429")
	fs.DurationVar(&f.ttl, "ttl", seckill.DefaultTTL, "lease time of a lock (renewed while the handler runs)")
	fs.IntVar(&f.writeLimit, "write-limit", seckill.DefaultWriteLimit, "with -lock redis, at most this many order writes of one voucher at once across every node\n(a permit of the semaphore \"order-writes:<voucher>\" around the database write, waited for up to -wait,\nthen 429); every node sharing -redis must pass the same; 0 disables")
	fs.BoolVar(&f.countWrites, "count-writes", false, "with -lock redis, count the order writes in progress across the nodes in a Redis counter\n(two round trips per order) and export the highest count seen as seckill_order_writes_peak on /metrics\n(the demo reads it)")
	fs.BoolVar(&f.uniqueIndex, "unique-index", false, "add a unique index on orders(user_id, voucher_id): the database backstop\n(the design notes' \"AP mode\"); off by default so that the lock alone is tested")
	fs.BoolVar(&f.unfenced, "unfenced", false, "with -lock redis, check the user's orders before the write transaction, as without a lock\n(the control of the lost-lock scenario: when Redis forgets a held lock, a second holder places a\nsecond order); off: the check and the insert in one transaction ordered by the lease's fence")
	fs.BoolVar(&f.traceStdout, "trace-stdout", false, "trace each order (HTTP, gRPC and Connect, continuing a client's traceparent) and write its spans\nto stdout, one JSON object a line: the order's server span and its lock's \"lock <key template>\";\noff: no tracer provider is installed")
	fs.DurationVar(&f.timeouts.ReadHeader, "read-header-timeout", seckill.DefaultReadHeaderTimeout,
		"HTTP: time a client has to send the request line and headers (from the request's first byte)")
	fs.DurationVar(&f.timeouts.Read, "read-timeout", seckill.DefaultReadTimeout,
		"HTTP: time a client has to send the whole request, body included (at least -read-header-timeout)")
	fs.DurationVar(&f.timeouts.Write, "write-timeout", seckill.DefaultWriteTimeout,
		"HTTP: time to send the answer; on the net/http stacks (nethttp, chi, gin, echo, echov5) and Connect it runs\nfrom the end of the request header, so it must be longer than -wait plus the handler's work")
	fs.DurationVar(&f.timeouts.Idle, "idle-timeout", seckill.DefaultIdleTimeout,
		"HTTP: how long an idle keep-alive connection is kept open")
	return fs, f
}

// checkTimeouts reports a bad -*-timeout flag by its name (zero would
// silently mean the default in seckill.Timeouts).
func (f *serveFlags) checkTimeouts() error {
	t := f.timeouts
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"-read-header-timeout", t.ReadHeader}, {"-read-timeout", t.Read}, {"-write-timeout", t.Write}, {"-idle-timeout", t.Idle}} {
		if d.v <= 0 {
			return fmt.Errorf("%s %v: want a positive duration", d.name, d.v)
		}
	}
	if t.ReadHeader > t.Read {
		return fmt.Errorf("-read-header-timeout %v is longer than -read-timeout %v, which bounds the whole request", t.ReadHeader, t.Read)
	}
	if t.Write <= f.wait {
		return fmt.Errorf("-write-timeout %v must be longer than -wait %v (on the net/http stacks it bounds the wait and the handler too)", t.Write, f.wait)
	}
	if f.writeLimit > 0 && t.Write <= 2*f.wait {
		return fmt.Errorf("-write-timeout %v must be longer than twice -wait %v with -write-limit: an order may wait -wait for its lock, then -wait for a write permit", t.Write, f.wait)
	}
	return nil
}

func serve(ctx context.Context, args []string) error {
	fs, f := serveFlagSet()
	if err := parse(fs, args); err != nil {
		return err
	}
	if f.writeLimit < 0 {
		return fmt.Errorf("-write-limit %d: want 0 (no limit) or more", f.writeLimit)
	}
	if err := f.checkTimeouts(); err != nil {
		return err
	}
	mode, err := seckill.ParseLockMode(f.lock)
	if err != nil {
		return err
	}
	if _, err := seckill.ParseStack(f.httpImpl); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	st, err := seckill.Open(ctx, f.dsn)
	if err != nil {
		return err
	}
	defer st.Close()
	if f.uniqueIndex {
		if err := st.EnsureUniqueIndex(ctx); err != nil {
			return err
		}
	}
	var traceOut io.Writer
	if f.traceStdout {
		traceOut = os.Stdout
	}
	tel, err := newTelemetry(traceOut)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	// Deferred before the Locker's Shutdown, so it runs after it: the
	// releases of that Shutdown are recorded and their spans written.
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.shutdown(ctx); err != nil {
			log.Error("seckill: telemetry shutdown", "err", err)
		}
	}()
	svc := &seckill.Service{Store: st, Unfenced: f.unfenced}
	var wc *writeCounter // -count-writes
	cfg := seckill.Config{Service: svc, Mode: mode, Wait: f.wait, TTL: f.ttl, Logger: log, Timeouts: f.timeouts,
		Metrics: tel.metrics, Tracer: tel.tracer, Local: &seckill.LocalLocks{}} // one set for the node's HTTP, gRPC and Connect servers
	if mode == seckill.LockRedis {
		opt, err := redis.ParseURL(f.redisURL)
		if err != nil {
			return fmt.Errorf("-redis: %w", err)
		}
		client := redis.NewClient(opt)
		defer client.Close()
		locker, err := core.New(client, append([]core.Option{core.WithTTL(f.ttl), core.WithWait(f.wait)}, tel.lockOptions...)...)
		if err != nil {
			return fmt.Errorf("-ttl, -wait: %w", err)
		}
		defer func() {
			// Release what is still held, so that a restart does not leave
			// in-flight locks for their TTL.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			locker.Shutdown(ctx)
		}()
		cfg.Locker = locker
		if f.writeLimit > 0 {
			svc.Locker, svc.WriteLimit, svc.WriteWait, svc.WriteTTL = locker, f.writeLimit, f.wait, f.ttl
		}
		if f.countWrites {
			wc = &writeCounter{client: client}
			svc.WriteProbe = wc.probe
		}
	}
	if err := tel.serviceMetrics(svc, wc); err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}

	// gRPC and Connect first: once HTTP answers /healthz, every
	// listener is up.
	errc := make(chan error, 3)
	var shutdown []func(context.Context) error
	stopGRPC, grpcAddr, err := serveGRPC(cfg, f.grpcAddr, errc)
	if err != nil {
		return err
	}
	shutdown = append(shutdown, stopGRPC)
	stopConnect, connectAddr, err := serveConnect(cfg, f.connectAddr, errc)
	if err != nil {
		shutdownAll(shutdown)
		return err
	}
	shutdown = append(shutdown, stopConnect)
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		shutdownAll(shutdown)
		return err
	}
	stopHTTP, err := serveHTTP(cfg, f.httpImpl, ln, errc)
	if err != nil {
		shutdownAll(shutdown)
		return err
	}
	shutdown = append(shutdown, stopHTTP)
	log.Info("seckill: serving", "http", ln.Addr().String(), "grpc", grpcAddr, "connect", connectAddr, "lock", mode, "http_stack", f.httpImpl,
		"db", st.Kind(), "unfenced", f.unfenced, "trace_stdout", f.traceStdout)

	select {
	case <-ctx.Done():
		err = nil
	case err = <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	}
	shutdownAll(shutdown)
	return err
}

// serveHTTP serves cfg's HTTP API on ln with the stack (one of
// seckill.Stacks) and returns its graceful shutdown; a serve error goes to
// errc. Every stack applies cfg.Timeouts (seckill.NewStackServer). ln is
// closed on error.
func serveHTTP(cfg seckill.Config, stack string, ln net.Listener, errc chan<- error) (func(context.Context) error, error) {
	srv, err := seckill.NewStackServer(cfg, stack)
	if err != nil {
		ln.Close()
		return nil, err
	}
	go func() { errc <- srv.Serve(ln) }()
	return srv.Shutdown, nil
}

// shutdownAll runs the shutdowns, the last started first.
func shutdownAll(fns []func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i](ctx)
	}
}
