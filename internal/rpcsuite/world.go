package rpcsuite

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
	"github.com/lockgate/lockgate/redistest"
)

// world is one case's world: a real Redis, a Locker on it with the case's
// own prefix, the service, and (once served) a client.
type world struct {
	stack  Stack
	redis  *redistest.Server
	rdb    *redis.Client
	locker *core.Locker
	prefix string
	svc    *Service
	client Client
	// served receives, for every unary call, the code the server side
	// answered (the lock interceptor's answer as the chain saw it, before
	// the client's own deadline handling can mask it).
	served chan servedCall
}

type servedCall struct {
	method string
	code   Code
}

// newWorld starts Redis and a Locker on it with the case's own prefix and
// opts (after the prefix).
func newWorld(t testing.TB, s Stack, opts ...core.Option) *world {
	t.Helper()
	srv := redistest.Start(t)
	return newWorldOn(t, s, srv, srv.Client(t), opts...)
}

// newWorldOn is newWorld with a given server and client (for example a
// client with go-redis's default timeouts and retries).
func newWorldOn(t testing.TB, s Stack, srv *redistest.Server, rdb *redis.Client, opts ...core.Option) *world {
	t.Helper()
	prefix := "rpcsuite-" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()) + ":"
	if len(prefix) > core.MaxPrefixLen {
		prefix = prefix[:core.MaxPrefixLen]
	}
	l, err := core.New(rdb, append([]core.Option{core.WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return &world{stack: s, redis: srv, rdb: rdb, locker: l, prefix: prefix, svc: NewService(), served: make(chan servedCall, 256)}
}

// serve serves the service behind the interceptor on w.locker, with the
// settings of set (if not nil) applied to the Server.
func (w *world) serve(t testing.TB, set func(*Server)) *world {
	t.Helper()
	s := Server{Locker: w.locker, Service: w.svc, Served: w.record}
	if set != nil {
		set(&s)
	}
	w.client = w.stack.Serve(t, s)
	t.Cleanup(w.svc.Release) // before the server stops (cleanups run last first)
	return w
}

// serveControl serves the service without the interceptor.
func (w *world) serveControl(t testing.TB) *world {
	t.Helper()
	w.client = w.stack.Serve(t, Server{Service: w.svc, Served: w.record})
	t.Cleanup(w.svc.Release)
	return w
}

func (w *world) record(method string, code Code) {
	select {
	case w.served <- servedCall{method, code}:
	default:
	}
}

// servedCode waits (bounded) for the server side's answer to a call of
// method.
func (w *world) servedCode(t testing.TB, method string) Code {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case c := <-w.served:
			if c.method == method {
				return c.code
			}
		case <-timeout.C:
			t.Fatalf("no answer of %s recorded within 10s", method)
		}
	}
}

// call is w.client.Call.
func (w *world) call(ctx context.Context, method string, req *testpb.OrderRequest, md ...string) Reply {
	return w.client.Call(ctx, method, req, md...)
}

// startHolder starts a call of method with req, which must reach its
// handler and hold there (pause_ms -1), and returns once the handler is
// inside. The returned channel yields the call's reply after
// w.svc.Release() (or the call's end).
func (w *world) startHolder(t testing.TB, ctx context.Context, method string, req *testpb.OrderRequest, md ...string) <-chan Reply {
	t.Helper()
	w.svc.DrainEntered()
	done := make(chan Reply, 1)
	go func() { done <- w.call(ctx, method, req, md...) }()
	w.svc.WaitEntered(t, method, func() error {
		select {
		case r := <-done:
			return r.Err
		default:
			return nil
		}
	})
	return done
}

// wait returns the reply of a holder started by startHolder, bounded.
func wait(t testing.TB, done <-chan Reply) Reply {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the holder's call did not end within 10s")
		return Reply{}
	}
}

// lockKey is the Redis key of the lock named name.
func (w *world) lockKey(name string) string { return w.prefix + "{" + name + "}" }

// exists reports whether the Redis key k exists, read with a direct client.
func (w *world) exists(t testing.TB, k string) bool {
	t.Helper()
	n, err := w.rdb.Exists(context.Background(), k).Result()
	if err != nil {
		t.Fatalf("EXISTS %s: %v", k, err)
	}
	return n == 1
}

// lockKeys lists the lock hashes under the case's prefix.
func (w *world) lockKeys(t testing.TB) []string {
	t.Helper()
	keys, err := w.rdb.Keys(context.Background(), w.prefix+"*").Result()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	var locks []string
	for _, k := range keys {
		// Lock hashes end with the hash tag; fence keys (":fence") and the
		// done markers of releases (":done:<owner>") are not locks.
		if strings.HasSuffix(k, "}") {
			locks = append(locks, k)
		}
	}
	return locks
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// req builds an OrderRequest.
func req(user string, voucher int64, pauseMs int64) *testpb.OrderRequest {
	return &testpb.OrderRequest{UserId: user, VoucherId: voucher, PauseMs: pauseMs}
}
