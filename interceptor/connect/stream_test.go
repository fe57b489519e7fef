package connectlock_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	connectlock "github.com/lockgate/lockgate/interceptor/connect"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/internal/rpclock"
	"github.com/lockgate/lockgate/internal/rpcsuite"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
	"github.com/lockgate/lockgate/redistest"
)

// TestServerStreamHoldsLock: a server-streaming procedure locks on its
// request message (received by the interceptor before the handler), the
// handler receives that same request, the lock is held while the stream
// lives and released when it ends; a missing field is InvalidArgument.
func TestServerStreamHoldsLock(t *testing.T) {
	e := newEnv(t)
	ctx := locktest.Context(t)

	s1, err := e.client.Watch(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1", PauseMs: -1}))
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer s1.Close()
	if !s1.Receive() {
		t.Fatalf("Watch first reply: %v", s1.Err())
	}
	if first := s1.Msg(); first.GetKey() != "watch:u1" || first.GetEcho() != "u1" || first.GetFence() <= 0 {
		t.Fatalf("first reply %v: want key watch:u1, the request handed on (echo u1), a fence", first)
	}

	// While s1 lives, the same key is busy (annotation wait 0s).
	s2, err := e.client.Watch(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1"}))
	if err == nil {
		if s2.Receive() {
			t.Fatalf("second Watch while the first lives got a reply %v", s2.Msg())
		}
		err = s2.Err()
		s2.Close()
	}
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("second Watch while the first lives: %v, want ResourceExhausted", err)
	}
	// Another user is not blocked (the control).
	s3, err := e.client.Watch(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u2"}))
	if err != nil {
		t.Fatalf("Watch u2: %v", err)
	}
	defer s3.Close()
	if !s3.Receive() || s3.Msg().GetKey() != "watch:u2" {
		t.Fatalf("Watch u2 reply: %v, %v", s3.Msg(), s3.Err())
	}

	e.Service.Release()
	for _, s := range []*connect.ServerStreamForClient[testpb.OrderReply]{s1, s3} {
		if !s.Receive() {
			t.Fatalf("second reply: %v", s.Err())
		}
		if s.Receive() || s.Err() != nil {
			t.Fatalf("end of stream: %v %v, want the end", s.Msg(), s.Err())
		}
	}
	// The stream ended: the lock is free again.
	if e.Exists(t, e.LockKey("watch:u1")) {
		t.Fatal("watch:u1 still locked after its stream ended")
	}
	s4, err := e.client.Watch(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1"}))
	if err != nil {
		t.Fatalf("Watch after the first ended: %v", err)
	}
	defer s4.Close()
	if !s4.Receive() || s4.Msg().GetKey() != "watch:u1" {
		t.Fatalf("Watch after the first ended: %v, %v", s4.Msg(), s4.Err())
	}
	// A missing request field is InvalidArgument naming it; the handler
	// does not run.
	calls := e.Service.Calls()
	s5, err := e.client.Watch(ctx, connect.NewRequest(&testpb.OrderRequest{}))
	if err == nil {
		if s5.Receive() {
			t.Fatalf("Watch without user_id got a reply %v", s5.Msg())
		}
		err = s5.Err()
		s5.Close()
	}
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || !strings.Contains(ce.Message(), "user_id") {
		t.Fatalf("Watch without user_id: %v, want InvalidArgument naming user_id", err)
	}
	if e.Service.Calls() != calls {
		t.Fatal("the handler ran for a bad key")
	}
}

// TestClientStreamLocksOnHeaders: a client-streaming procedure locks on a
// request header ({md.x-user-id}) before its handler runs, for the life of
// the stream; without the header it is InvalidArgument naming it.
func TestClientStreamLocksOnHeaders(t *testing.T) {
	e := newEnv(t)
	ctx := locktest.Context(t)

	e.Service.DrainEntered()
	u1 := e.client.Upload(ctx)
	u1.RequestHeader().Set("x-user-id", "m1")
	if err := u1.Send(&testpb.OrderRequest{UserId: "a", PauseMs: -1}); err != nil {
		t.Fatalf("Upload send: %v", err)
	}
	e.Service.WaitEntered(t, "Upload", func() error { _, err := u1.CloseAndReceive(); return err })

	u2 := e.client.Upload(ctx)
	u2.RequestHeader().Set("x-user-id", "m1")
	_ = u2.Send(&testpb.OrderRequest{UserId: "b"}) // may fail once the server answered
	if _, err := u2.CloseAndReceive(); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("second Upload with the same header: %v, want ResourceExhausted", err)
	}
	// The control: another user's upload runs alongside.
	u3 := e.client.Upload(ctx)
	u3.RequestHeader().Set("x-user-id", "m2")
	if err := u3.Send(&testpb.OrderRequest{UserId: "c"}); err != nil {
		t.Fatalf("Upload m2 send: %v", err)
	}
	if r, err := u3.CloseAndReceive(); err != nil || r.Msg.GetKey() != "upload:m2" {
		t.Fatalf("Upload m2 = %v, %v", r, err)
	}

	e.Service.Release()
	r, err := u1.CloseAndReceive()
	if err != nil || r.Msg.GetKey() != "upload:m1" || r.Msg.GetEcho() != "a" {
		t.Fatalf("first Upload = %v, %v; want key upload:m1 echo a", r, err)
	}

	// No header: InvalidArgument naming it, before the handler.
	u4 := e.client.Upload(ctx)
	_ = u4.Send(&testpb.OrderRequest{UserId: "d"})
	_, err = u4.CloseAndReceive()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || !strings.Contains(ce.Message(), "md.x-user-id") {
		t.Fatalf("Upload without the header: %v, want InvalidArgument naming md.x-user-id", err)
	}
}

// TestBidiStreamHoldsLock: a bidi stream locks on a header, every message
// of the stream runs under the one lease, and the lease ends with the
// stream. An unannotated bidi stream (Feed) is untouched.
func TestBidiStreamHoldsLock(t *testing.T) {
	e := newEnv(t)
	ctx := locktest.Context(t)

	c1 := e.client.Chat(ctx)
	c1.RequestHeader().Set("x-user-id", "m1")
	var fence int64
	for i, u := range []string{"a", "b"} {
		if err := c1.Send(&testpb.OrderRequest{UserId: u}); err != nil {
			t.Fatalf("Chat send %d: %v", i, err)
		}
		r, err := c1.Receive()
		if err != nil || r.GetKey() != "chat:m1" || r.GetEcho() != u {
			t.Fatalf("Chat reply %d = %v, %v", i, r, err)
		}
		if i > 0 && r.GetFence() != fence {
			t.Fatalf("fence changed within one stream: %d then %d", fence, r.GetFence())
		}
		fence = r.GetFence()
	}

	c2 := e.client.Chat(ctx)
	c2.RequestHeader().Set("x-user-id", "m1")
	_ = c2.Send(&testpb.OrderRequest{UserId: "x"})
	if _, err := c2.Receive(); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("second Chat while the first lives: %v, want ResourceExhausted", err)
	}
	_ = c2.CloseRequest()
	_ = c2.CloseResponse()

	// Feed is unannotated: runs alongside, without a lease.
	f := e.client.Feed(ctx)
	f.RequestHeader().Set("x-user-id", "m1")
	if err := f.Send(&testpb.OrderRequest{UserId: "f"}); err != nil {
		t.Fatalf("Feed send: %v", err)
	}
	if r, err := f.Receive(); err != nil || r.GetKey() != "" || r.GetEcho() != "f" {
		t.Fatalf("Feed reply = %v, %v; want no lease", r, err)
	}
	if err := f.CloseRequest(); err != nil {
		t.Fatalf("Feed CloseRequest: %v", err)
	}
	if _, err := f.Receive(); !errors.Is(err, io.EOF) {
		t.Fatalf("Feed end: %v", err)
	}
	_ = f.CloseResponse()

	if err := c1.CloseRequest(); err != nil {
		t.Fatalf("CloseRequest: %v", err)
	}
	if _, err := c1.Receive(); !errors.Is(err, io.EOF) {
		t.Fatalf("Chat end: %v, want io.EOF", err)
	}
	_ = c1.CloseResponse()
	c3 := e.client.Chat(ctx)
	c3.RequestHeader().Set("x-user-id", "m1")
	if err := c3.Send(&testpb.OrderRequest{UserId: "c"}); err != nil {
		t.Fatalf("Chat 3 send: %v", err)
	}
	r, err := c3.Receive()
	if err != nil || r.GetFence() <= fence {
		t.Fatalf("Chat after the first ended = %v, %v; want a new lease with a higher fence than %d", r, err, fence)
	}
	if err := c3.CloseRequest(); err != nil {
		t.Fatalf("CloseRequest: %v", err)
	}
	if _, err := c3.Receive(); !errors.Is(err, io.EOF) {
		t.Fatalf("Chat 3 end: %v", err)
	}
	_ = c3.CloseResponse()
}

// TestStreamsOnRefusingRedis: streams get the unary calls' answers (the
// suite's): on a Redis that refuses connections (its port closed, go-redis's
// default client) a server stream (Watch) and a bidi stream (Chat) are
// CodeUnavailable at once, with a RetryInfo detail of one second
// (rpclock.UnavailableRetryAfter) and Retry-After "1" in the error's
// metadata (a stream's status travels at its end, so not as the HTTP
// status's header), no handler run. The control: a Watch without its key
// field is CodeInvalidArgument, with neither.
func TestStreamsOnRefusingRedis(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	e := &env{Env: rpcsuite.NewEnvOn(t, "connectlock", srv, rdb)}
	lk, err := connectlock.New(e.Locker)
	if err != nil {
		t.Fatal(err)
	}
	e.serve(t, connect.WithInterceptors(lk))
	ctx := locktest.Context(t)

	first := func(name string, recv func() error) (rpcsuite.Reply, string) {
		t.Helper()
		start := time.Now()
		err := recv()
		took := time.Since(start)
		if err == nil {
			t.Fatalf("%s on a refusing Redis got a reply", name)
		}
		r := replyOf(err)
		var ce *connect.Error
		retryAfter := ""
		if errors.As(err, &ce) {
			retryAfter = ce.Meta().Get("Retry-After")
		}
		t.Logf("%s on a refusing Redis: %v, Retry-After %q, after %v", name, r, retryAfter, took)
		if took >= 1500*time.Millisecond {
			t.Errorf("%s answered after %v, want at once (< 1.5s)", name, took)
		}
		return r, retryAfter
	}
	watch := func(req *testpb.OrderRequest) func() error {
		return func() error {
			s, err := e.client.Watch(ctx, connect.NewRequest(req))
			if err != nil {
				return err
			}
			defer s.Close()
			s.Receive()
			return s.Err()
		}
	}
	for name, recv := range map[string]func() error{
		"Watch": watch(&testpb.OrderRequest{UserId: "u1"}),
		"Chat": func() error {
			c := e.client.Chat(ctx)
			c.RequestHeader().Set("x-user-id", "m1")
			defer c.CloseResponse()
			_ = c.Send(&testpb.OrderRequest{UserId: "a"}) // may fail once the server answered
			_ = c.CloseRequest()
			_, err := c.Receive()
			return err
		},
	} {
		r, retryAfter := first(name, recv)
		if r.Code != rpcsuite.Unavailable || !r.RetryInfo || r.RetryDelay != rpclock.UnavailableRetryAfter || retryAfter != "1" {
			t.Errorf("%s on a refusing Redis: %v, Retry-After %q; want Unavailable with a RetryInfo of %v and Retry-After 1", name, r, retryAfter, rpclock.UnavailableRetryAfter)
		}
	}
	if n := e.Service.Calls(); n != 0 {
		t.Fatalf("%d stream handlers ran on a refusing Redis", n)
	}
	if r, retryAfter := first("Watch without user_id", watch(&testpb.OrderRequest{})); r.Code != rpcsuite.InvalidArgument || r.RetryInfo || retryAfter != "" {
		t.Fatalf("control: Watch without user_id: %v, Retry-After %q; want InvalidArgument without a retry hint", r, retryAfter)
	}
}
