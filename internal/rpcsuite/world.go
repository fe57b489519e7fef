package rpcsuite

import (
	"context"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
)

// world is one case's world: its Env (a real Redis, a Locker on it with
// the case's own prefix, the service) and, once served, a client.
type world struct {
	*Env
	stack  Stack
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

// newWorld is the world of a case on its own Env (NewEnv: a new Redis, a
// Locker on it with the case's own prefix and opts after the prefix).
func newWorld(t testing.TB, s Stack, opts ...core.Option) *world {
	t.Helper()
	return worldOn(s, NewEnv(t, "rpcsuite", opts...))
}

// worldOn is the world of a case on e.
func worldOn(s Stack, e *Env) *world {
	return &world{Env: e, stack: s, served: make(chan servedCall, 256)}
}

// serve serves the service behind the interceptor on w.Locker, with the
// settings of set (if not nil) applied to the Server.
func (w *world) serve(t testing.TB, set func(*Server)) *world {
	t.Helper()
	s := Server{Locker: w.Locker, Service: w.Service, Served: w.record}
	if set != nil {
		set(&s)
	}
	w.client = w.stack.Serve(t, s)
	t.Cleanup(w.Service.Release) // before the server stops (cleanups run last first)
	return w
}

// serveControl serves the service without the interceptor.
func (w *world) serveControl(t testing.TB) *world {
	t.Helper()
	w.client = w.stack.Serve(t, Server{Service: w.Service, Served: w.record})
	t.Cleanup(w.Service.Release)
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
// w.Service.Release() (or the call's end).
func (w *world) startHolder(t testing.TB, ctx context.Context, method string, req *testpb.OrderRequest, md ...string) <-chan Reply {
	t.Helper()
	w.Service.DrainEntered()
	done := make(chan Reply, 1)
	go func() { done <- w.call(ctx, method, req, md...) }()
	w.Service.WaitEntered(t, method, func() error {
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

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// req builds an OrderRequest.
func req(user string, voucher int64, pauseMs int64) *testpb.OrderRequest {
	return &testpb.OrderRequest{UserId: user, VoucherId: voucher, PauseMs: pauseMs}
}
