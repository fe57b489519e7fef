package grpclock_test

import (
	"context"
	"io"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/lockgate/lockgate/core"
	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
	"github.com/lockgate/lockgate/interceptor/grpc/internal/testpb"
)

// ownerMD are the obvious metadata names a client could try to pass
// itself off as a lock's owner with.
var ownerMD = []string{"x-lock-owner", "lockgate-owner", "x-lockgate-owner", "x-owner", "owner", "lock-owner", "x-request-id"}

// TestNoOwnerFromMetadata: while call A holds its lock (handler blocked) —
// a unary Order on order:1:1, a server-streaming Watch on watch:2 and a
// client-streaming Upload on upload:3 — call B for the same key never
// re-enters A's lock, whatever metadata it carries: each owner-ish name,
// one at a time and all at once (also as a -bin key), set to each value
// observable about A — the fence and key of its lease (from the probe in
// the unary chain; Watch sends them in its first reply while still
// holding), its x-request-id, and even the owner token of the lock hash in
// Redis. Every B is ResourceExhausted and no handler of B runs; A's hold
// is untouched. The controls: inside the unary chain a nested Lock with
// A's lease context re-enters; once A is released, the same Bs are served.
func TestNoOwnerFromMetadata(t *testing.T) {
	e := newBase(t)
	lk, err := grpclock.New(e.locker)
	if err != nil {
		t.Fatal(err)
	}
	type held struct {
		key       string
		fence     int64
		reentered bool
		err       error
	}
	heldc := make(chan held, 1)
	// probe runs inside the lock for A's Order: it reports A's lease and
	// locks its key again with A's lease context.
	probe := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if r, ok := req.(*testpb.OrderRequest); ok && info.FullMethod == methodOrder && r.GetPauseMs() < 0 {
			lease := grpclock.FromContext(ctx)
			h := held{key: lease.Key(), fence: lease.Fence()}
			inner, err := e.locker.Lock(ctx, lease.Key(), core.WithWait(core.NoWait))
			if err == nil {
				h.reentered = inner.Reentrant()
				err = inner.Unlock(ctx)
			}
			h.err = err
			heldc <- h
		}
		return handler(ctx, req)
	}
	e.serve(t, grpc.ChainUnaryInterceptor(lk.Unary(), probe), grpc.ChainStreamInterceptor(lk.Stream()))
	ctx := testCtx(t)
	const requestID = "req-a-6f1c2d"
	withMD := func(kv ...string) context.Context { return metadata.NewOutgoingContext(ctx, metadata.Pairs(kv...)) }

	// A, unary.
	doneOrder := e.startHolder(t, "Order", func() error {
		_, err := e.client.Order(withMD("x-request-id", requestID), &testpb.OrderRequest{UserId: "1", VoucherId: 1, PauseMs: -1})
		return err
	})
	h := <-heldc
	if h.err != nil || !h.reentered || h.key != "order:1:1" {
		t.Fatalf("control: a nested Lock with A's lease context: %+v; want a re-entry of order:1:1", h)
	}
	// A, server streaming: its first reply carries its lease.
	watchA, err := e.client.Watch(withMD("x-request-id", requestID), &testpb.OrderRequest{UserId: "2", PauseMs: -1})
	if err != nil {
		t.Fatal(err)
	}
	firstWatch, err := watchA.Recv()
	if err != nil || firstWatch.GetKey() != "watch:2" || firstWatch.GetFence() <= 0 {
		t.Fatalf("Watch A's first reply: %v %v", firstWatch, err)
	}
	// A, client streaming, locked on its x-user-id.
	uploadA, err := e.client.Upload(withMD("x-user-id", "3", "x-request-id", requestID))
	if err != nil {
		t.Fatal(err)
	}
	if err := uploadA.Send(&testpb.OrderRequest{PauseMs: -1}); err != nil {
		t.Fatal(err)
	}
	e.waitEntered(t, "Upload")

	// The values B tries, per lock: everything observable about A.
	owner := func(name string) (string, string) {
		k := e.lockKey(name)
		o, err := e.rdb.HGet(ctx, k, "owner").Result()
		if err != nil || o == "" {
			t.Fatalf("HGET %s owner: %q %v", k, o, err)
		}
		f, err := e.rdb.HGet(ctx, k, "fence").Result()
		if err != nil {
			t.Fatal(err)
		}
		return o, f
	}
	orderOwner, _ := owner("order:1:1")
	watchOwner, _ := owner("watch:2")
	uploadOwner, uploadFence := owner("upload:3")
	locks := []struct {
		name   string
		values []string
		call   func(ctx context.Context) error
	}{
		{"order:1:1", []string{strconv.FormatInt(h.fence, 10), h.key, orderOwner, requestID}, func(ctx context.Context) error {
			_, err := e.client.Quick(ctx, &testpb.OrderRequest{UserId: "1", VoucherId: 1})
			return err
		}},
		{"watch:2", []string{strconv.FormatInt(firstWatch.GetFence(), 10), firstWatch.GetKey(), watchOwner, requestID}, func(ctx context.Context) error {
			st, err := e.client.Watch(ctx, &testpb.OrderRequest{UserId: "2"})
			if err != nil {
				return err
			}
			for {
				if _, err := st.Recv(); err == io.EOF {
					return nil
				} else if err != nil {
					return err
				}
			}
		}},
		{"upload:3", []string{uploadFence, "upload:3", uploadOwner, requestID}, func(ctx context.Context) error {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-user-id", "3")
			st, err := e.client.Upload(ctx)
			if err != nil {
				return err
			}
			if err := st.Send(&testpb.OrderRequest{}); err != nil && err != io.EOF {
				return err
			}
			_, err = st.CloseAndRecv()
			return err
		}},
	}
	callsBefore := e.svc.calls.Load()
	// attempts lists the metadata of every B of a lock: one name at a
	// time, then all at once (and as binary metadata).
	attempts := func(values []string) [][]string {
		var out [][]string
		for _, v := range values {
			var all []string
			for _, name := range ownerMD {
				out = append(out, []string{name, v})
				all = append(all, name, v)
			}
			out = append(out, append(all, "lockgate-owner-bin", v))
		}
		return out
	}
	for _, l := range locks {
		for _, kv := range attempts(l.values) {
			err := l.call(withMD(kv...))
			if status.Code(err) != codes.ResourceExhausted {
				t.Errorf("B on %s with metadata %q: %v, want ResourceExhausted (busy): never A's lock", l.name, kv, err)
			}
		}
	}
	if n := e.svc.calls.Load() - callsBefore; n != 0 {
		t.Fatalf("%d handlers of B ran while A held the locks", n)
	}
	for _, l := range locks {
		if got, _ := owner(l.name); got != map[string]string{"order:1:1": orderOwner, "watch:2": watchOwner, "upload:3": uploadOwner}[l.name] {
			t.Fatalf("%s now has owner %q: A's hold was touched", l.name, got)
		}
	}

	e.svc.release()
	if err := <-doneOrder; err != nil {
		t.Fatalf("A's Order: %v", err)
	}
	for {
		if _, err := watchA.Recv(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("A's Watch: %v", err)
		}
	}
	if _, err := uploadA.CloseAndRecv(); err != nil {
		t.Fatalf("A's Upload: %v", err)
	}
	// The control: the last B of each lock (every name at once) is served
	// now, and nothing is left held.
	for _, l := range locks {
		all := attempts(l.values)
		if err := l.call(withMD(all[len(all)-1]...)); err != nil {
			t.Fatalf("B on %s after A's release: %v, want OK", l.name, err)
		}
	}
	if left := e.lockKeys(t); len(left) != 0 {
		t.Fatalf("locks left held: %v", left)
	}
}
