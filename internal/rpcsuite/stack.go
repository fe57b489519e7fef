// Package rpcsuite is the one behaviour suite the RPC lock interceptors run
// (grpclock over grpc-go, connectlock over Connect): given a Stack — a way
// to serve the test service (package testpb, service Orders, whose methods
// carry (lockgate.v1.lock) annotations) behind the interceptor under test,
// and to call it — Run checks on real redis-servers what both promise
// alike: bad input naming the field and locking nothing, busy with a
// RetryInfo, one call at a time with a control that overlaps, different
// keys in parallel, typed placeholders canonical, Redis down fail-closed
// and fail-open, Redis hung, a deadline while busy, a lost lock cancelling
// the handler, a panic releasing, the lease in the handler's context
// (nested locking re-enters), Go rules over annotations, lock events named
// by the key pattern, no owner taken from the request, a limit of N
// calls of one key at once, and shared (read) locks beside an exclusive
// writer; and the answers
// to a failing Redis (answers.go): a Redis that refuses connections answered
// Unavailable at once, its cause logged; a single attempt on a hung Redis
// answered within its attempt budget; every Unavailable with a RetryInfo
// and, over HTTP, a Retry-After; a key naming a field its request does
// not have a setup error; a body that does not decode InvalidArgument
// without Go type names (stacks with a RawClient).
//
// The suite is framework-neutral: it imports neither grpc-go nor Connect.
// Each stack maps its framework's codes to Code (both number them as
// gRPC does) and its handlers to Service. What only one framework has
// (stream specifics, setup errors of its own options, fuzzing, examples,
// benchmarks) stays in that interceptor's tests, which share with the
// suite the helpers they have in common: Env (a test's Redis, Locker and
// service), Options (a Server's settings as the package's options),
// RunFailures (the mapping of lock failures to what the client is told)
// and Interleave (the benchmarks' timing of variants in turn).
package rpcsuite

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/rpclock"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
)

// ServiceName is the full name of the test service; its procedures are
// "/lockgate.testpb.Orders/<Method>" (FullMethod).
const ServiceName = "lockgate.testpb.Orders"

// FullMethod returns "/lockgate.testpb.Orders/" + method, the name gRPC
// (grpc.UnaryServerInfo.FullMethod) and Connect (connect.Spec.Procedure)
// give the method, and the one Go rules are written with.
func FullMethod(method string) string { return "/" + ServiceName + "/" + method }

// ServerTimeoutHeader is the metadata (gRPC) or request header (Connect)
// with which a call asks the stack's outermost interceptor to run it under
// a server-side deadline (a Go duration, "200ms"), as a server that bounds
// its calls would: the client then sees the server's answer to the
// deadline, not its own.
const ServerTimeoutHeader = "x-server-timeout"

// Stack is one RPC interceptor under test.
type Stack struct {
	// Name names the stack in test output ("grpc", "connect", ...).
	Name string
	// Serve starts a server on a free loopback port serving the test
	// service, every handler of which calls s.Service; it returns a
	// client of that server and stops both at t's cleanup.
	//
	// Unless s.Locker is nil (the control: no interceptor), the lock
	// interceptor under test is built on s.Locker with s's settings (a
	// build error fails the test) and chained inside an outermost
	// interceptor of the stack that, for every unary call:
	//   - runs it under the deadline ServerTimeoutHeader asks for, if any;
	//   - recovers a panic of the chain (the handler's, after the lock
	//     interceptor had its say) into an Internal error;
	//   - calls s.Served, if set, with the method ("Order") and the code
	//     the rest of the chain answered (OK for none).
	// The control has that outermost interceptor too.
	Serve func(t testing.TB, s Server) Client
	// Build builds the interceptor under test on l with the settings of s
	// (as Serve would, serving nothing) and returns its constructor's
	// error, nil when it builds.
	Build func(l *core.Locker, s Server) error
	// RetryAfterIn is where the stack's answers carry the HTTP
	// Retry-After: in the response's HTTP header (Connect's protocol,
	// gRPC-Web), in its trailer (gRPC over HTTP/2 served by Connect: an
	// error's metadata travels in the trailers), or Nowhere (grpc-go:
	// RetryInfo only).
	RetryAfterIn Where
}

// Where is where a stack's answers carry the HTTP Retry-After.
type Where int

// The places of Retry-After.
const (
	Nowhere Where = iota
	InHeader
	InTrailer
)

// Server is what Stack.Serve serves.
type Server struct {
	// Locker is the Locker of the interceptor; nil serves the service
	// without the interceptor (the control).
	Locker *core.Locker
	// Rules are Go rules (grpclock.WithRule, connectlock.WithRule), by
	// method name.
	Rules []Rule
	// LockOptions are given to WithLockOptions when set.
	LockOptions []core.LockOption
	// ReleaseTimeout is given to WithReleaseTimeout when not 0.
	ReleaseTimeout time.Duration
	// Logger is given to WithLogger when not nil.
	Logger *slog.Logger
	// Service is the behaviour of every handler.
	Service *Service
	// Served, if set, is called by the outermost interceptor (see Stack).
	Served func(method string, code Code)
	// PlainCodecs serves the service with the stack's codecs whose
	// decoding errors name no Go type (connectlock.PlainCodecs); only
	// stacks whose Client is a RawClient are asked for it.
	PlainCodecs bool
}

// Rule is a Go rule of one method of the test service, with the fields of
// grpclock.Rule and connectlock.Rule.
type Rule struct {
	Method   string // "Order", "Plain", ...; FullMethod gives the procedure
	Key      string
	Wait     time.Duration
	TTL      time.Duration
	FailOpen bool
	Options  []core.LockOption
	Limit    int
	Shared   bool
}

// Options are an interceptor's constructors of its Options (grpclock's,
// connectlock's), with which its Stack.Serve turns a Server's settings
// into the interceptor's options (For).
type Options[O any] struct {
	// WithRule sets the Go rule r of the method fullMethod
	// ("/lockgate.testpb.Orders/Order"); r converts to the package's Rule.
	WithRule           func(fullMethod string, r rpclock.Rule) O
	WithLockOptions    func(opts ...core.LockOption) O
	WithReleaseTimeout func(d time.Duration) O
	WithLogger         func(l *slog.Logger) O
}

// For returns the options s asks for: a WithRule per rule of s.Rules, in
// their order, then WithLockOptions, WithReleaseTimeout and WithLogger
// when s sets them.
func (c Options[O]) For(s Server) []O {
	var opts []O
	for _, r := range s.Rules {
		opts = append(opts, c.WithRule(FullMethod(r.Method), rpclock.Rule{
			Key: r.Key, Wait: r.Wait, TTL: r.TTL, FailOpen: r.FailOpen, Options: r.Options, Limit: r.Limit, Shared: r.Shared,
		}))
	}
	if len(s.LockOptions) > 0 {
		opts = append(opts, c.WithLockOptions(s.LockOptions...))
	}
	if s.ReleaseTimeout != 0 {
		opts = append(opts, c.WithReleaseTimeout(s.ReleaseTimeout))
	}
	if s.Logger != nil {
		opts = append(opts, c.WithLogger(s.Logger))
	}
	return opts
}

// Client calls the served test service.
type Client interface {
	// Call makes one unary call of method ("Order", "Quick", "Nested",
	// "Relaxed", "Plain") with req and the metadata (gRPC) or request
	// headers (Connect) md, given as name, value pairs; a name ending in
	// "-bin" carries a binary value, encoded as the framework does
	// (grpc-go itself; Connect: connect.EncodeBinaryHeader). It returns
	// what the client saw.
	Call(ctx context.Context, method string, req *testpb.OrderRequest, md ...string) Reply
}

// RawClient is a Client that can also send a request body as it is, such
// as one that does not decode (Connect's clients; grpc-go's is not one:
// grpc-go decodes a request before any interceptor runs and answers a
// body that does not decode itself).
type RawClient interface {
	Client
	// CallRaw makes one unary call of method whose request body is body,
	// in the codec named codec ("json" or "proto"), as the stack's
	// protocol carries it.
	CallRaw(ctx context.Context, method, codec string, body []byte) Reply
}

// Reply is what a client saw of one call.
type Reply struct {
	// Code is the call's code, OK for a reply.
	Code Code
	// Message is the error's message ("" for OK).
	Message string
	// RetryInfo says whether the error carried an errdetails.RetryInfo
	// detail, and RetryDelay its delay.
	RetryInfo  bool
	RetryDelay time.Duration
	// RetryAfterHeader and RetryAfterTrailer are the Retry-After of the
	// response's HTTP header and trailer ("" for none, and for a stack
	// whose client does not read them: Stack.RetryAfterIn Nowhere).
	RetryAfterHeader, RetryAfterTrailer string
	// Msg is the reply (nil unless Code is OK).
	Msg *testpb.OrderReply
	// Err is the client's error, for messages.
	Err error
}

// Key, Fence and Echo read Msg (zero values for none).
func (r Reply) Key() string  { return r.Msg.GetKey() }
func (r Reply) Fence() int64 { return r.Msg.GetFence() }
func (r Reply) Echo() string { return r.Msg.GetEcho() }
func (r Reply) String() string {
	if r.Code == OK {
		return "OK " + r.Msg.String()
	}
	s := r.Code.String() + " " + strconv.Quote(r.Message)
	if r.RetryInfo {
		s += " RetryInfo " + r.RetryDelay.String()
	}
	if r.RetryAfterHeader != "" {
		s += " Retry-After " + strconv.Quote(r.RetryAfterHeader)
	}
	if r.RetryAfterTrailer != "" {
		s += " Retry-After (trailer) " + strconv.Quote(r.RetryAfterTrailer)
	}
	return s
}

// RetryAfter is the Retry-After of r where the stack carries it ("" for
// Nowhere).
func (r Reply) RetryAfter(in Where) string {
	switch in {
	case InHeader:
		return r.RetryAfterHeader
	case InTrailer:
		return r.RetryAfterTrailer
	}
	return ""
}

// Code is an RPC status code, numbered as gRPC's codes.Code and Connect's
// connect.Code both are (Connect has no OK: 0 means no error).
type Code uint32

// The codes.
const (
	OK                 Code = 0
	Canceled           Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	AlreadyExists      Code = 6
	PermissionDenied   Code = 7
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	OutOfRange         Code = 11
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
	DataLoss           Code = 15
	Unauthenticated    Code = 16
)

var codeNames = [...]string{
	"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
	"PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
	"Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated",
}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
}

// Run runs the suite against s: one subtest per behaviour, each on its own
// redis-server.
func Run(t *testing.T, s Stack) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case on redis-servers of its own
			c.run(t, s)
		})
	}
}

type suiteCase struct {
	name string
	run  func(t *testing.T, s Stack)
}
