package rpcsuite

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
)

// Service is the test service's behaviour, framework-neutral: every
// stack's handlers of Orders call it. Each handler counts how many calls
// are inside at once and replies with the lease it runs under
// (core.FromContext, as grpclock.FromContext and connectlock.FromContext
// are).
//
// Its errors are the handler context's (context.Canceled,
// context.DeadlineExceeded) or a stream's; the stack answers them as its
// framework answers a handler's context error (Canceled,
// DeadlineExceeded).
type Service struct {
	// OnHold, if set, is called by a holding handler (pause_ms -1) with
	// its context and request once inside, before it waits. Set it before
	// serving.
	OnHold func(ctx context.Context, req *testpb.OrderRequest)
	// OnPanic, if set, is called by a panicking handler (pause_ms -2) with
	// its context before it panics. Set it before serving.
	OnPanic func(ctx context.Context)
	// Holds, if set, receives a Held for every handler holding on its own
	// (pause_ms -3), once inside: it waits for its Release, Release of the
	// Service, or the end of its context. Set it before serving.
	Holds chan Held

	gauge    *locktest.Gauge // calls inside at once
	entered  chan string     // a handler started (method name); buffered
	hold     chan struct{}
	holdOnce sync.Once
	causes   chan error // cause of a held handler's ctx ending
}

// NewService returns a Service with no call made.
func NewService() *Service {
	return &Service{
		gauge:   locktest.NewGauge(),
		entered: make(chan string, 256),
		hold:    make(chan struct{}),
		causes:  make(chan error, 16),
	}
}

// Release lets every held handler (pause_ms -1) finish, now and later.
func (s *Service) Release() { s.holdOnce.Do(func() { close(s.hold) }) }

// Calls is how many handlers started.
func (s *Service) Calls() int32 { return s.gauge.Ran() }

// MaxInside is the most handlers that were inside at once.
func (s *Service) MaxInside() int32 { return s.gauge.Max() }

func (s *Service) enter(method string) func() {
	s.gauge.Enter()
	select {
	case s.entered <- method:
	default:
	}
	return s.gauge.Exit
}

// Held is a handler holding on its own (pause_ms -3): its method, the key
// of the lease it runs under, and Release, which lets it finish.
type Held struct {
	Method  string
	Key     string
	Release func()
}

// pause is the handler's work: pauseMs long (cut short when another call
// is inside, so that overlap shows at once), or, for -1, until released or
// the context ends; -2 panics; -3 holds on its own (Holds).
func (s *Service) pause(ctx context.Context, method string, req *testpb.OrderRequest) error {
	switch pauseMs := req.GetPauseMs(); {
	case pauseMs == -3:
		done := make(chan struct{})
		var once sync.Once
		h := Held{Method: method, Key: core.FromContext(ctx).Key(), Release: func() { once.Do(func() { close(done) }) }}
		select {
		case s.Holds <- h:
		case <-s.hold:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-done:
		case <-s.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	case pauseMs == -2:
		if s.OnPanic != nil {
			s.OnPanic(ctx)
		}
		panic("rpcsuite: the handler panics, as pause_ms -2 asks")
	case pauseMs < 0:
		if s.OnHold != nil {
			s.OnHold(ctx, req)
		}
		select {
		case <-s.hold:
			return nil
		case <-ctx.Done():
			select {
			case s.causes <- context.Cause(ctx):
			default:
			}
			return ctx.Err()
		}
	case pauseMs > 0:
		t := time.NewTimer(time.Duration(pauseMs) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.gauge.Overlap():
		}
	}
	return nil
}

func reply(ctx context.Context, req *testpb.OrderRequest) *testpb.OrderReply {
	l := core.FromContext(ctx)
	return &testpb.OrderReply{Fence: l.Fence(), Key: l.Key(), Echo: req.GetUserId()}
}

// Unary is the handler of the unary methods (Order, Quick, Nested,
// Relaxed, Plain): method names it.
func (s *Service) Unary(ctx context.Context, method string, req *testpb.OrderRequest) (*testpb.OrderReply, error) {
	defer s.enter(method)()
	if err := s.pause(ctx, method, req); err != nil {
		return nil, err
	}
	return reply(ctx, req), nil
}

// Watch (server streaming) sends one reply, then pauses as the request
// says, then sends a second reply.
func (s *Service) Watch(ctx context.Context, req *testpb.OrderRequest, send func(*testpb.OrderReply) error) error {
	defer s.enter("Watch")()
	if err := send(reply(ctx, req)); err != nil {
		return err
	}
	if err := s.pause(ctx, "Watch", req); err != nil {
		return err
	}
	return send(reply(ctx, req))
}

// Upload (client streaming) pauses after the first message as it says,
// then drains the stream (recv returns io.EOF at its end) and replies
// with the first message's user.
func (s *Service) Upload(ctx context.Context, recv func() (*testpb.OrderRequest, error)) (*testpb.OrderReply, error) {
	defer s.enter("Upload")()
	first, err := recv()
	if err != nil {
		return nil, err
	}
	if err := s.pause(ctx, "Upload", first); err != nil {
		return nil, err
	}
	for {
		if _, err := recv(); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
	}
	return reply(ctx, first), nil
}

// Echo (bidi streaming: Chat, Feed, named by method) replies to every
// message until the client closes its side (recv returns io.EOF).
func (s *Service) Echo(ctx context.Context, method string, recv func() (*testpb.OrderRequest, error), send func(*testpb.OrderReply) error) error {
	defer s.enter(method)()
	for {
		req, err := recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := send(reply(ctx, req)); err != nil {
			return err
		}
	}
}

// DrainEntered forgets the start signals of earlier handlers, so that
// they are not mistaken for the next one's.
func (s *Service) DrainEntered() {
	for {
		select {
		case <-s.entered:
		default:
			return
		}
	}
}

// WaitEntered waits (bounded) for a handler of method to start; on timeout
// it fails t with what diagnose (if not nil) returns, such as the error
// the call ended with.
func (s *Service) WaitEntered(t testing.TB, method string, diagnose func() error) {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case m := <-s.entered:
			if m == method {
				return
			}
		case <-timeout.C:
			var why error
			if diagnose != nil {
				why = diagnose()
			}
			t.Fatalf("no %s handler started within 10s (the call: %v)", method, why)
		}
	}
}

// Cause waits (bounded) for a held handler's context to end and returns
// its cause.
func (s *Service) Cause(t testing.TB) error {
	t.Helper()
	select {
	case c := <-s.causes:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no held handler's context ended within 10s")
		return nil
	}
}
