package grpclock_test

import (
	"context"
	"io"
	"strconv"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/internal/rpcsuite"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
)

// TestNoOwnerFromMetadataStreams is the suite's "no owner from the
// request" (internal/rpcsuite, unary) for streams: while call A holds its
// lock — a server-streaming Watch on watch:2 and a client-streaming Upload
// on upload:3 — call B for the same key never re-enters A's lock, whatever
// metadata it carries: each owner-ish name, one at a time and all at once
// (also as a -bin key), set to each value observable about A — the fence
// and key of its lease (Watch sends them in its first reply while still
// holding), its x-request-id, and even the owner token of the lock hash in
// Redis. Every B is ResourceExhausted and no handler of B runs; A's hold
// is untouched. The control: once A is released, the same Bs are served.
func TestNoOwnerFromMetadataStreams(t *testing.T) {
	e := newEnv(t)
	ctx := locktest.Context(t)
	const requestID = "req-a-6f1c2d"
	withMD := func(kv ...string) context.Context { return metadata.NewOutgoingContext(ctx, metadata.Pairs(kv...)) }

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
	e.Service.DrainEntered()
	uploadA, err := e.client.Upload(withMD("x-user-id", "3", "x-request-id", requestID))
	if err != nil {
		t.Fatal(err)
	}
	if err := uploadA.Send(&testpb.OrderRequest{PauseMs: -1}); err != nil {
		t.Fatal(err)
	}
	e.Service.WaitEntered(t, "Upload", nil)

	// The values B tries, per lock: everything observable about A.
	owner := func(name string) (string, string) {
		k := e.LockKey(name)
		o, f, err := locktest.Holder(ctx, e.RDB, k)
		if err != nil || o == "" || f == "" {
			t.Fatalf("%s's owner and fence: %q %q %v", k, o, f, err)
		}
		return o, f
	}
	watchOwner, _ := owner("watch:2")
	uploadOwner, uploadFence := owner("upload:3")
	locks := []struct {
		name   string
		owner  string
		values []string
		call   func(ctx context.Context) error
	}{
		{"watch:2", watchOwner, []string{strconv.FormatInt(firstWatch.GetFence(), 10), firstWatch.GetKey(), watchOwner, requestID}, func(ctx context.Context) error {
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
		{"upload:3", uploadOwner, []string{uploadFence, "upload:3", uploadOwner, requestID}, func(ctx context.Context) error {
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
	callsBefore := e.Service.Calls()
	for _, l := range locks {
		for _, kv := range rpcsuite.OwnerAttempts(l.values) {
			err := l.call(withMD(kv...))
			if status.Code(err) != codes.ResourceExhausted {
				t.Errorf("B on %s with metadata %q: %v, want ResourceExhausted (busy): never A's lock", l.name, kv, err)
			}
		}
	}
	if n := e.Service.Calls() - callsBefore; n != 0 {
		t.Fatalf("%d handlers of B ran while A held the locks", n)
	}
	for _, l := range locks {
		if got, _ := owner(l.name); got != l.owner {
			t.Fatalf("%s now has owner %q: A's hold was touched", l.name, got)
		}
	}

	e.Service.Release()
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
		all := rpcsuite.OwnerAttempts(l.values)
		if err := l.call(withMD(all[len(all)-1]...)); err != nil {
			t.Fatalf("B on %s after A's release: %v, want OK", l.name, err)
		}
	}
	if left := e.LockKeys(t); len(left) != 0 {
		t.Fatalf("locks left held: %v", left)
	}
}
