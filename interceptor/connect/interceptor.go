package connectlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/rpclock"
	"github.com/lockgate/lockgate/keyfunc"
)

// Interceptor holds the compiled lock rules of every locked procedure and
// applies them to the unary and streaming handlers it wraps; it is a
// connect.Interceptor. Client calls pass through it untouched. It is safe
// for concurrent use.
type Interceptor struct {
	gate rpclock.Gate
	cfg  rpclock.Config // for rules read from a handler's schema
	// procs has every procedure of the registry: its compiled rule, or
	// nil when it is not locked.
	procs map[string]*rpclock.Method
	// schemas caches, for procedures not in the registry, the rule read
	// from the handler's schema (*schemaRule). Its keys are the handlers'
	// procedures (connect.Spec.Procedure of a handler is the one it was
	// built with, not the request's path), so it is bounded by them.
	schemas sync.Map
}

// schemaRule is the rule of a procedure read from its handler's schema: m
// (nil when it has no annotation), or err when the annotation is invalid.
type schemaRule struct {
	m   *rpclock.Method
	err error
}

var _ connect.Interceptor = (*Interceptor)(nil)

// New reads the (lockgate.v1.lock) annotations of every service registered
// in protoregistry.GlobalFiles (or WithFiles), applies the Go rules of
// WithRule over them, and checks every rule against its method. Call it
// once, at start-up, after the generated packages of the services are
// linked in (their init registers the descriptors), and pass the
// Interceptor to the handlers with connect.WithInterceptors.
//
// Every rule is checked here, whether fail-open or not: a bad rule or
// option is a setup error, never a failure (or an unlocked run) of every
// call.
//
// Errors, joined, each naming what is at fault: a nil locker; a nil Option;
// a bad option value (WithFiles(nil), WithReleaseTimeout(d <= 0), an
// invalid or nil core option in WithLockOptions, reported with core's
// error, which matches core.ErrInvalid); and one error per bad rule, naming
// the procedure, whether it is an annotation or a Go rule, and the field
// (see the package doc for what is checked).
func New(locker *core.Locker, opts ...Option) (*Interceptor, error) {
	b, err := rpclock.NewBase("connectlock", locker, opts)
	if err != nil {
		return nil, err
	}
	procs := map[string]*rpclock.Method{}
	b.Config.Files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			ms := fd.Services().Get(i).Methods()
			for j := 0; j < ms.Len(); j++ {
				procs[rpclock.FullMethodName(ms.Get(j))] = nil
			}
		}
		return true
	})
	for name, m := range b.Methods {
		procs[name] = m
	}
	return &Interceptor{gate: b.Gate, cfg: b.Config, procs: procs}, nil
}

// Methods returns the procedures New found locked, for logs and tests.
// (Procedures outside the registry, locked by their handler's schema, are
// not listed.)
func (i *Interceptor) Methods() []string {
	names := make([]string, 0, len(i.procs))
	for n, m := range i.procs {
		if m != nil {
			names = append(names, n)
		}
	}
	return names
}

// method returns the rule of the procedure of spec: the one New compiled,
// or, for a procedure the registry does not have, the annotation of the
// handler's schema (a protoreflect.MethodDescriptor, which
// connect.WithSchema sets and generated code passes), read at its first
// call. nil means the procedure is not locked. A schema's annotation that
// does not compile fails the calls with CodeInternal (it is logged once):
// a bad rule never runs a handler without its lock.
func (i *Interceptor) method(spec connect.Spec) (*rpclock.Method, error) {
	if m, ok := i.procs[spec.Procedure]; ok {
		return m, nil
	}
	md, ok := spec.Schema.(protoreflect.MethodDescriptor)
	if !ok {
		return nil, nil
	}
	v, ok := i.schemas.Load(spec.Procedure)
	if !ok {
		m, err := rpclock.CompileAnnotation(&i.cfg, spec.Procedure, md)
		var loaded bool
		v, loaded = i.schemas.LoadOrStore(spec.Procedure, &schemaRule{m: m, err: err})
		if !loaded && err != nil {
			i.gate.Logger.Error("connectlock: the lock rule of a procedure outside the registry is invalid; its calls fail",
				"procedure", spec.Procedure, "error", err)
		}
	}
	r := v.(*schemaRule)
	if r.err != nil {
		return nil, connect.NewError(connect.CodeInternal, errors.New(spec.Procedure+": internal error"))
	}
	return r.m, nil
}

// WrapUnary locks a unary handler's calls by the procedure's rule; client
// calls and procedures without a rule pass through.
func (i *Interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		spec := req.Spec()
		if spec.IsClient {
			return next(ctx, req)
		}
		m, err := i.method(spec)
		if err != nil {
			return nil, err
		}
		if m == nil {
			return next(ctx, req)
		}
		var msg protoreflect.Message
		if pm, ok := req.Any().(proto.Message); ok {
			msg = pm.ProtoReflect()
		}
		lease, err := i.acquire(ctx, m, msg, req.Header())
		if err != nil {
			return nil, err
		}
		if lease == nil { // fail-open
			return next(ctx, req)
		}
		defer i.gate.Release(ctx, m, lease)
		return next(lease.Context(), req)
	}
}

// WrapStreamingClient returns next: the interceptor locks handlers only.
func (i *Interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler locks a streaming handler for the life of the
// stream. A server-streaming procedure whose key reads the request
// receives it here, before the handler, and hands it to the handler's
// first Receive; client-streaming and bidi procedures lock on headers and
// context values only.
func (i *Interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		m, err := i.method(conn.Spec())
		if err != nil {
			return err
		}
		if m == nil {
			return next(ctx, conn)
		}
		var msg protoreflect.Message
		if m.Input != nil {
			first := m.Input.New().Interface()
			if err := conn.Receive(first); err != nil {
				if errors.Is(err, io.EOF) {
					// As connect answers a server stream without its
					// request: nothing to lock on, nothing to run.
					return connect.NewError(connect.CodeUnimplemented, fmt.Errorf("server streaming %s has zero messages", m.Name))
				}
				return err
			}
			msg = first.ProtoReflect()
			conn = &handOn{StreamingHandlerConn: conn, first: first}
		}
		lease, err := i.acquire(ctx, m, msg, conn.RequestHeader())
		if err != nil {
			return err
		}
		if lease == nil { // fail-open
			return next(ctx, conn)
		}
		defer i.gate.Release(ctx, m, lease)
		return next(lease.Context(), conn)
	}
}

// acquire builds the key and takes the lock. It returns (nil, nil) when
// the rule is fail-open and Redis is unavailable, and a *connect.Error for
// every failure.
func (i *Interceptor) acquire(ctx context.Context, m *rpclock.Method, msg protoreflect.Message, h http.Header) (*core.Lease, error) {
	lease, f := i.gate.Acquire(ctx, m, msg, headerMD(h))
	if f != nil {
		return nil, failureError(f)
	}
	return lease, nil
}

// headerMD reads {md.name} from the request headers: the first value of
// the header name, decoded from base64 for a binary header (a name ending
// in "-bin"), as gRPC reads metadata. A binary value that does not decode
// is an invalid value.
func headerMD(h http.Header) rpclock.Metadata {
	return func(name string) (string, bool, error) {
		vs := h.Values(name)
		if len(vs) == 0 {
			return "", false, nil
		}
		if !strings.HasSuffix(strings.ToLower(name), "-bin") {
			return vs[0], true, nil
		}
		b, err := connect.DecodeBinaryHeader(vs[0])
		if err != nil {
			return "", false, keyfunc.ErrInvalidValue
		}
		return string(b), true, nil
	}
}

// failureError maps a failed acquisition (rpclock.Gate.Acquire, which also
// logs what the client is not told) to the *connect.Error that says what
// happened; the package doc has the table.
func failureError(f *rpclock.Failure) error {
	switch f.Outcome {
	case rpclock.InvalidKey:
		return connect.NewError(connect.CodeInvalidArgument, errors.New(f.Message))
	case rpclock.Busy:
		e := connect.NewError(connect.CodeResourceExhausted, errors.New(f.Message))
		// The HTTP header the HTTP adapters send with their busy answer
		// (whole seconds, at least 1), beside the RetryInfo detail.
		e.Meta().Set("Retry-After", strconv.Itoa(core.RetryAfterSeconds(f.Err)))
		return withRetryInfo(e, f)
	case rpclock.Unavailable:
		// Connect answers it 503 over HTTP: a short Retry-After, as the
		// HTTP adapters' 503, beside the RetryInfo detail of the same
		// pause (rpclock.UnavailableRetryAfter).
		e := connect.NewError(connect.CodeUnavailable, errors.New(f.Message))
		e.Meta().Set("Retry-After", unavailableRetryAfter)
		return withRetryInfo(e, f)
	case rpclock.Canceled:
		return connect.NewError(connect.CodeCanceled, f.Err)
	case rpclock.DeadlineExceeded:
		return connect.NewError(connect.CodeDeadlineExceeded, f.Err)
	}
	return connect.NewError(connect.CodeInternal, errors.New(f.Message))
}

// handOn hands the handler the request the interceptor already received
// (server streaming), then reads from the stream.
type handOn struct {
	connect.StreamingHandlerConn
	first proto.Message // received by the interceptor, not yet handed on
}

// Receive returns the request received by the interceptor on the first
// call, then reads from the stream.
func (c *handOn) Receive(m any) error {
	if c.first == nil {
		return c.StreamingHandlerConn.Receive(m)
	}
	first := c.first
	c.first = nil
	if err := rpclock.HandOn(m, first); err != nil {
		return connect.NewError(connect.CodeInternal, errors.New("connectlock: "+err.Error()))
	}
	return nil
}

// withRetryInfo adds to e a RetryInfo detail of f's RetryAfter, if f has
// one.
func withRetryInfo(e *connect.Error, f *rpclock.Failure) *connect.Error {
	if !f.HasRetryAfter {
		return e
	}
	if d, err := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(f.RetryAfter)}); err == nil {
		e.AddDetail(d)
	}
	return e
}

// unavailableRetryAfter is the Retry-After header of an Unavailable
// answer (HTTP 503 over the Connect protocol): rpclock's one second, as
// the HTTP adapters' 503.
var unavailableRetryAfter = strconv.Itoa(int(rpclock.UnavailableRetryAfter / time.Second))
