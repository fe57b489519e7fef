package grpclock_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/internal/rpclock"
	"github.com/lockgate/lockgate/internal/rpcsuite"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
	"github.com/lockgate/lockgate/redistest"
)

// TestServerStreamHoldsLock: a server-streaming method locks on its request
// message, the handler receives that same request, the lock is held while
// the stream lives and released when it ends.
func TestServerStreamHoldsLock(t *testing.T) {
	e := newEnv(t)
	ctx := locktest.Context(t)

	s1, err := e.client.Watch(ctx, &testpb.OrderRequest{UserId: "u1", PauseMs: -1})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	first, err := s1.Recv()
	if err != nil {
		t.Fatalf("Watch first reply: %v", err)
	}
	if first.GetKey() != "watch:u1" || first.GetEcho() != "u1" || first.GetFence() <= 0 {
		t.Fatalf("first reply %v: want key watch:u1, the request handed on (echo u1), a fence", first)
	}

	// While s1 lives, the same key is busy (annotation wait 0s).
	s2, err := e.client.Watch(ctx, &testpb.OrderRequest{UserId: "u1"})
	if err == nil {
		_, err = s2.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second Watch while the first lives: %v, want ResourceExhausted", err)
	}
	// Another user is not blocked.
	s3, err := e.client.Watch(ctx, &testpb.OrderRequest{UserId: "u2"})
	if err != nil {
		t.Fatalf("Watch u2: %v", err)
	}
	if r, err := s3.Recv(); err != nil || r.GetKey() != "watch:u2" {
		t.Fatalf("Watch u2 reply: %v, %v", r, err)
	}

	e.Service.Release()
	for _, s := range []interface {
		Recv() (*testpb.OrderReply, error)
	}{s1, s3} {
		if _, err := s.Recv(); err != nil {
			t.Fatalf("second reply: %v", err)
		}
		if _, err := s.Recv(); err != io.EOF {
			t.Fatalf("end of stream: %v, want io.EOF", err)
		}
	}
	// The stream ended: the lock is free again.
	s4, err := e.client.Watch(ctx, &testpb.OrderRequest{UserId: "u1"})
	if err != nil {
		t.Fatalf("Watch after the first ended: %v", err)
	}
	if r, err := s4.Recv(); err != nil || r.GetKey() != "watch:u1" {
		t.Fatalf("Watch after the first ended: %v, %v", r, err)
	}
	// A missing request field is InvalidArgument naming it.
	s5, err := e.client.Watch(ctx, &testpb.OrderRequest{})
	if err == nil {
		_, err = s5.Recv()
	}
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "user_id") {
		t.Fatalf("Watch without user_id: %v, want InvalidArgument naming user_id", err)
	}
}

// TestClientStreamLocksOnMetadata: a client-streaming method locks on
// metadata before its handler runs, for the life of the stream.
func TestClientStreamLocksOnMetadata(t *testing.T) {
	e := newEnv(t)
	ctx := locktest.Context(t)
	m1 := metadata.AppendToOutgoingContext(ctx, "x-user-id", "m1")

	u1, err := e.client.Upload(m1)
	if err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if err := u1.Send(&testpb.OrderRequest{UserId: "a", PauseMs: -1}); err != nil {
		t.Fatalf("Upload send: %v", err)
	}
	e.Service.WaitEntered(t, "Upload", func() error { _, err := u1.CloseAndRecv(); return err })

	u2, err := e.client.Upload(m1)
	if err != nil {
		t.Fatalf("Upload 2: %v", err)
	}
	_ = u2.Send(&testpb.OrderRequest{UserId: "b"}) // may fail once the server answered
	if _, err := u2.CloseAndRecv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second Upload with the same metadata: %v, want ResourceExhausted", err)
	}

	e.Service.Release()
	r, err := u1.CloseAndRecv()
	if err != nil || r.GetKey() != "upload:m1" || r.GetEcho() != "a" {
		t.Fatalf("first Upload = %v, %v; want key upload:m1 echo a", r, err)
	}

	u3, err := e.client.Upload(m1)
	if err != nil {
		t.Fatalf("Upload 3: %v", err)
	}
	if err := u3.Send(&testpb.OrderRequest{UserId: "c"}); err != nil {
		t.Fatalf("Upload 3 send: %v", err)
	}
	if r, err := u3.CloseAndRecv(); err != nil || r.GetKey() != "upload:m1" {
		t.Fatalf("Upload after the first ended = %v, %v", r, err)
	}

	// No metadata: InvalidArgument naming it, before the handler.
	u4, err := e.client.Upload(ctx)
	if err != nil {
		t.Fatalf("Upload 4: %v", err)
	}
	_ = u4.Send(&testpb.OrderRequest{UserId: "d"})
	if _, err := u4.CloseAndRecv(); status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "md.x-user-id") {
		t.Fatalf("Upload without metadata: %v, want InvalidArgument naming md.x-user-id", err)
	}
}

// TestBidiStreamHoldsLock: a bidi stream locks on metadata, every message
// of the stream runs under the one lease, and the lease ends with the
// stream. An unannotated bidi stream (Feed) is untouched.
func TestBidiStreamHoldsLock(t *testing.T) {
	e := newEnv(t)
	ctx := locktest.Context(t)
	m1 := metadata.AppendToOutgoingContext(ctx, "x-user-id", "m1")

	c1, err := e.client.Chat(m1)
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	var fence int64
	for i, u := range []string{"a", "b"} {
		if err := c1.Send(&testpb.OrderRequest{UserId: u}); err != nil {
			t.Fatalf("Chat send %d: %v", i, err)
		}
		r, err := c1.Recv()
		if err != nil || r.GetKey() != "chat:m1" || r.GetEcho() != u {
			t.Fatalf("Chat reply %d = %v, %v", i, r, err)
		}
		if i > 0 && r.GetFence() != fence {
			t.Fatalf("fence changed within one stream: %d then %d", fence, r.GetFence())
		}
		fence = r.GetFence()
	}

	c2, err := e.client.Chat(m1)
	if err != nil {
		t.Fatalf("Chat 2: %v", err)
	}
	_ = c2.Send(&testpb.OrderRequest{UserId: "x"})
	if _, err := c2.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second Chat while the first lives: %v, want ResourceExhausted", err)
	}

	// Feed is unannotated: runs alongside, without a lease.
	f, err := e.client.Feed(m1)
	if err != nil {
		t.Fatalf("Feed: %v", err)
	}
	if err := f.Send(&testpb.OrderRequest{UserId: "f"}); err != nil {
		t.Fatalf("Feed send: %v", err)
	}
	if r, err := f.Recv(); err != nil || r.GetKey() != "" || r.GetEcho() != "f" {
		t.Fatalf("Feed reply = %v, %v; want no lease", r, err)
	}
	if err := f.CloseSend(); err != nil {
		t.Fatalf("Feed CloseSend: %v", err)
	}
	if _, err := f.Recv(); err != io.EOF {
		t.Fatalf("Feed end: %v", err)
	}

	if err := c1.CloseSend(); err != nil {
		t.Fatalf("CloseSend: %v", err)
	}
	if _, err := c1.Recv(); err != io.EOF {
		t.Fatalf("Chat end: %v, want io.EOF", err)
	}
	c3, err := e.client.Chat(m1)
	if err != nil {
		t.Fatalf("Chat 3: %v", err)
	}
	if err := c3.Send(&testpb.OrderRequest{UserId: "c"}); err != nil {
		t.Fatalf("Chat 3 send: %v", err)
	}
	r, err := c3.Recv()
	if err != nil || r.GetFence() <= fence {
		t.Fatalf("Chat after the first ended = %v, %v; want a new lease with a higher fence than %d", r, err, fence)
	}
	if err := c3.CloseSend(); err != nil {
		t.Fatalf("CloseSend: %v", err)
	}
	if _, err := c3.Recv(); err != io.EOF {
		t.Fatalf("Chat 3 end: %v", err)
	}
}

// TestStreamsOnRefusingRedis: streams get the unary calls' answers (the
// suite's): on a Redis that refuses connections (its port closed, go-redis's
// default client) a server stream (Watch) and a bidi stream (Chat) are
// Unavailable at once, with a RetryInfo of one second
// (rpclock.UnavailableRetryAfter), no handler run. The control: a Watch
// without its key field is InvalidArgument, with no RetryInfo.
func TestStreamsOnRefusingRedis(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	e := &env{Env: rpcsuite.NewEnvOn(t, "grpclock", srv, rdb)}
	lk, err := grpclock.New(e.Locker)
	if err != nil {
		t.Fatal(err)
	}
	e.serve(t, lk.ServerOptions()...)
	ctx := locktest.Context(t)

	first := func(name string, open func() (recver, error)) rpcsuite.Reply {
		t.Helper()
		start := time.Now()
		s, err := open()
		if err == nil {
			_, err = s.Recv()
		}
		took := time.Since(start)
		if err == nil {
			t.Fatalf("%s on a refusing Redis got a reply", name)
		}
		r := replyOf(err)
		t.Logf("%s on a refusing Redis: %v after %v", name, r, took)
		if took >= 1500*time.Millisecond {
			t.Errorf("%s answered after %v, want at once (< 1.5s)", name, took)
		}
		return r
	}
	for name, open := range map[string]func() (recver, error){
		"Watch": func() (recver, error) {
			return e.client.Watch(ctx, &testpb.OrderRequest{UserId: "u1"})
		},
		"Chat": func() (recver, error) {
			c, err := e.client.Chat(metadata.AppendToOutgoingContext(ctx, "x-user-id", "m1"))
			if err == nil {
				_ = c.Send(&testpb.OrderRequest{UserId: "a"}) // may fail once the server answered
			}
			return c, err
		},
	} {
		r := first(name, open)
		if r.Code != rpcsuite.Unavailable || !r.RetryInfo || r.RetryDelay != rpclock.UnavailableRetryAfter {
			t.Errorf("%s on a refusing Redis: %v, want Unavailable with a RetryInfo of %v", name, r, rpclock.UnavailableRetryAfter)
		}
	}
	if n := e.Service.Calls(); n != 0 {
		t.Fatalf("%d stream handlers ran on a refusing Redis", n)
	}
	r := first("Watch without user_id", func() (recver, error) {
		return e.client.Watch(ctx, &testpb.OrderRequest{})
	})
	if r.Code != rpcsuite.InvalidArgument || r.RetryInfo {
		t.Fatalf("control: Watch without user_id: %v, want InvalidArgument without RetryInfo", r)
	}
}

// recver is a client stream's receiving side.
type recver interface {
	Recv() (*testpb.OrderReply, error)
}
