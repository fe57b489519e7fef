package httpsuite

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// seckill is the key template most cases lock with, and the route it is
// served on.
const (
	seckillKey  = "order:{query.user_id}:{path.voucher}"
	seckillPath = "/seckill/{voucher}"
)

// bound is how long a case waits for a signal (an event, a handler
// entering) before it fails: generous, since the machine may be loaded.
const bound = 20 * time.Second

// env is one case's world: its own redis-server, a client to it, and an
// HTTP client for the stack's servers.
type env struct {
	t      *testing.T
	s      Stack
	srv    *redistest.Server
	rdb    *redis.Client
	ctx    context.Context // bounds the case's requests
	client *http.Client
	tr     *http.Transport
	gates  []*gate
}

func newEnv(t *testing.T, s Stack) *env {
	t.Helper()
	srv := redistest.Start(t)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &env{
		t:      t,
		s:      s,
		srv:    srv,
		rdb:    srv.Client(t),
		ctx:    locktest.Context(t),
		client: &http.Client{Transport: tr, Timeout: 60 * time.Second},
		tr:     tr,
	}
}

// locker returns a Locker with its own Redis client (another instance).
func (e *env) locker(opts ...core.Option) *core.Locker {
	e.t.Helper()
	return locktest.Locker(e.t, e.srv.Client(e.t), opts...)
}

// serve starts one server of the stack for routes and returns its base
// URL.
func (e *env) serve(routes ...Route) string {
	e.t.Helper()
	base := e.s.Serve(e.t, routes)
	// Before the server stops (cleanups run last first): blocked handlers
	// and idle keep-alive connections would hold up a graceful shutdown.
	e.t.Cleanup(func() {
		for _, g := range e.gates {
			g.open()
		}
		e.tr.CloseIdleConnections()
	})
	return strings.TrimSuffix(base, "/")
}

func (e *env) do(method, url, ctype, body string) locktest.Result {
	return locktest.Do(e.ctx, e.client, method, url, ctype, body)
}

func (e *env) post(url string) locktest.Result { return e.do("POST", url, "", "") }

// held reports whether the lock named name exists in Redis.
func (e *env) held(name string) bool {
	e.t.Helper()
	return locktest.Held(e.t, context.Background(), e.rdb, name)
}

// inRedis is held for handlers (which must not fail the test from their
// goroutine): whether the lock named name exists, false on an error.
func (e *env) inRedis(name string) bool {
	n, err := e.rdb.Exists(context.Background(), locktest.RedisKey(name)).Result()
	return err == nil && n == 1
}

// waitCtx bounds one wait for a signal.
func (e *env) waitCtx() context.Context {
	ctx, cancel := context.WithTimeout(e.ctx, bound)
	e.t.Cleanup(cancel)
	return ctx
}

// recv receives from c within bound, failing the case otherwise.
func recv[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case v := <-c:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing within %v", what, bound)
		panic("unreachable")
	}
}

// errorText is the {"error": "..."} text of r, failing if r is not one.
func errorText(t *testing.T, r locktest.Result) string {
	t.Helper()
	return locktest.ErrorText(t, r.Body)
}

// counter is a handler that counts its runs and answers 200 "ok".
type counter struct{ ran atomic.Int32 }

func (c *counter) handler(context.Context, *core.Lease, Request) (int, string) {
	c.ran.Add(1)
	return http.StatusOK, "ok"
}

func (c *counter) n() int32 { return c.ran.Load() }

// quiet is a logger that drops everything.
func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// textLogger logs text lines into buf.
func textLogger(buf *locktest.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, nil))
}

// gate blocks handlers until it is opened; the case's cleanup opens it
// before the servers stop (they wait for their handlers).
type gate struct{ c chan struct{} }

func (e *env) gate() *gate {
	g := &gate{c: make(chan struct{})}
	e.gates = append(e.gates, g)
	e.t.Cleanup(g.open)
	return g
}

func (g *gate) open() {
	select {
	case <-g.c:
	default:
		close(g.c)
	}
}

// wait blocks until the gate opens, or bound passes.
func (g *gate) wait() {
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case <-g.c:
	case <-timer.C:
	}
}
