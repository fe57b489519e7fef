package connectlock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/lockgate/lockgate/core"
	connectlock "github.com/lockgate/lockgate/interceptor/connect"
	"github.com/lockgate/lockgate/interceptor/connect/internal/testpbconnect"
	"github.com/lockgate/lockgate/internal/rpclock"
	"github.com/lockgate/lockgate/internal/rpcsuite"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
)

// orders serves the suite's test service with Connect: every handler is
// rpcsuite.Service's.
type orders struct{ svc *rpcsuite.Service }

var _ testpbconnect.OrdersHandler = orders{}

// connectErr answers a Service error as a Connect handler would: a
// *connect.Error as it is, a context error with its code.
func connectErr(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	return connect.NewError(connect.CodeUnknown, err)
}

func (o orders) unary(ctx context.Context, name string, req *connect.Request[testpb.OrderRequest]) (*connect.Response[testpb.OrderReply], error) {
	r, err := o.svc.Unary(ctx, name, req.Msg)
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(r), nil
}

func (o orders) Order(ctx context.Context, req *connect.Request[testpb.OrderRequest]) (*connect.Response[testpb.OrderReply], error) {
	return o.unary(ctx, "Order", req)
}

func (o orders) Quick(ctx context.Context, req *connect.Request[testpb.OrderRequest]) (*connect.Response[testpb.OrderReply], error) {
	return o.unary(ctx, "Quick", req)
}

func (o orders) Nested(ctx context.Context, req *connect.Request[testpb.OrderRequest]) (*connect.Response[testpb.OrderReply], error) {
	return o.unary(ctx, "Nested", req)
}

func (o orders) Relaxed(ctx context.Context, req *connect.Request[testpb.OrderRequest]) (*connect.Response[testpb.OrderReply], error) {
	return o.unary(ctx, "Relaxed", req)
}

func (o orders) Plain(ctx context.Context, req *connect.Request[testpb.OrderRequest]) (*connect.Response[testpb.OrderReply], error) {
	return o.unary(ctx, "Plain", req)
}

func (o orders) Watch(ctx context.Context, req *connect.Request[testpb.OrderRequest], st *connect.ServerStream[testpb.OrderReply]) error {
	return connectErr(o.svc.Watch(ctx, req.Msg, st.Send))
}

func (o orders) Upload(ctx context.Context, st *connect.ClientStream[testpb.OrderRequest]) (*connect.Response[testpb.OrderReply], error) {
	recv := func() (*testpb.OrderRequest, error) {
		if st.Receive() {
			return st.Msg(), nil
		}
		if err := st.Err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	r, err := o.svc.Upload(ctx, recv)
	if err != nil {
		return nil, connectErr(err)
	}
	return connect.NewResponse(r), nil
}

func bidiRecv(st *connect.BidiStream[testpb.OrderRequest, testpb.OrderReply]) func() (*testpb.OrderRequest, error) {
	return func() (*testpb.OrderRequest, error) {
		m, err := st.Receive()
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return m, err
	}
}

func (o orders) Chat(ctx context.Context, st *connect.BidiStream[testpb.OrderRequest, testpb.OrderReply]) error {
	return connectErr(o.svc.Echo(ctx, "Chat", bidiRecv(st), st.Send))
}

func (o orders) Feed(ctx context.Context, st *connect.BidiStream[testpb.OrderRequest, testpb.OrderReply]) error {
	return connectErr(o.svc.Echo(ctx, "Feed", bidiRecv(st), st.Send))
}

// outermost is the stack's outermost interceptor (rpcsuite.Stack): a unary
// call with the header rpcsuite.ServerTimeoutHeader runs under that
// server-side deadline; a panic of the chain is recovered into
// CodeInternal; served (if not nil) is told what the rest of the chain
// answered. Streams pass through.
type outermost struct{ served func(string, rpcsuite.Code) }

func (o outermost) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (resp connect.AnyResponse, err error) {
		if v := req.Header().Get(rpcsuite.ServerTimeoutHeader); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %w", rpcsuite.ServerTimeoutHeader, err))
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		defer func() {
			if p := recover(); p != nil {
				resp, err = nil, connect.NewError(connect.CodeInternal, fmt.Errorf("panic: %v", p))
			}
			if o.served != nil {
				o.served(path.Base(req.Spec().Procedure), codeOf(err))
			}
		}()
		return next(ctx, req)
	}
}

func (outermost) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (outermost) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func codeOf(err error) rpcsuite.Code {
	if err == nil {
		return rpcsuite.OK
	}
	return rpcsuite.Code(connect.CodeOf(err))
}

// protocol is how a test talks to the server.
type protocol struct {
	name string
	h2c  bool                   // HTTP/2 without TLS; else HTTP/1.1
	opts []connect.ClientOption // the client's protocol
}

var (
	connectHTTP1 = protocol{name: "connect", h2c: false}
	grpcH2C      = protocol{name: "grpc", h2c: true, opts: []connect.ClientOption{connect.WithGRPC()}}
	grpcWebHTTP1 = protocol{name: "grpcweb", h2c: false, opts: []connect.ClientOption{connect.WithGRPCWeb()}}
	connectH2C   = protocol{name: "connect-h2c", h2c: true}
)

// server is a served test service: a client of it and its base URL.
type server struct {
	http    *http.Client
	baseURL string
	p       protocol
}

// serve serves svc behind the handler options opts on a loopback
// httptest server speaking HTTP/1.1 and HTTP/2 without TLS; the client
// speaks p. Both stop at t's cleanup, after svc's held handlers are
// released.
func serve(t testing.TB, svc *rpcsuite.Service, p protocol, opts ...connect.HandlerOption) *server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(testpbconnect.NewOrdersHandler(orders{svc}, opts...))
	hs := httptest.NewUnstartedServer(mux)
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetHTTP1(true)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	hs.Start()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	if p.h2c {
		tr.Protocols.SetUnencryptedHTTP2(true)
	} else {
		tr.Protocols.SetHTTP1(true)
	}
	t.Cleanup(func() {
		svc.Release()
		tr.CloseIdleConnections()
		hs.Close()
	})
	return &server{http: &http.Client{Transport: recorder{tr}}, baseURL: hs.URL, p: p}
}

// recorder is the servers' clients' transport: for a call whose context
// carries a *seen (record), it keeps the HTTP response the call got, whose
// header and trailer (read once the body is) the suite's Reply reports.
type recorder struct{ base http.RoundTripper }

type seenKey struct{}

// seen is the response of one recorded call.
type seen struct {
	mu   sync.Mutex
	resp *http.Response
}

func (rt recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := rt.base.RoundTrip(r)
	if s, ok := r.Context().Value(seenKey{}).(*seen); ok && resp != nil {
		s.mu.Lock()
		s.resp = resp
		s.mu.Unlock()
	}
	return resp, err
}

// record returns ctx carrying a *seen for the call made with it.
func record(ctx context.Context) (context.Context, *seen) {
	s := &seen{}
	return context.WithValue(ctx, seenKey{}, s), s
}

// retryAfter sets r's Retry-After of the recorded response's header and
// trailer. Call it once the call has returned.
func (s *seen) retryAfter(r rpcsuite.Reply) rpcsuite.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resp != nil {
		r.RetryAfterHeader = s.resp.Header.Get("Retry-After")
		r.RetryAfterTrailer = s.resp.Trailer.Get("Retry-After")
	}
	return r
}

// client returns the generated client of the server.
func (s *server) client() testpbconnect.OrdersClient {
	return testpbconnect.NewOrdersClient(s.http, s.baseURL, s.p.opts...)
}

// suiteOptions are connectlock's constructors of the options a suite's
// Server asks for (rpcsuite.Options.For).
var suiteOptions = rpcsuite.Options[connectlock.Option]{
	WithRule: func(procedure string, r rpclock.Rule) connectlock.Option {
		return connectlock.WithRule(procedure, connectlock.Rule(r))
	},
	WithLockOptions:    connectlock.WithLockOptions,
	WithReleaseTimeout: connectlock.WithReleaseTimeout,
	WithLogger:         connectlock.WithLogger,
}

// connectStack is the suite's Connect stack for protocol p: the test
// service on an httptest server, behind connectlock's interceptor. Its
// answers carry Retry-After in the HTTP header, but over gRPC (HTTP/2),
// whose errors travel in the trailers, in the trailer.
func connectStack(p protocol) rpcsuite.Stack {
	in := rpcsuite.InHeader
	if p.name == grpcH2C.name {
		in = rpcsuite.InTrailer
	}
	return rpcsuite.Stack{Name: p.name, RetryAfterIn: in, Build: buildSuite, Serve: func(t testing.TB, s rpcsuite.Server) rpcsuite.Client {
		t.Helper()
		ics := []connect.Interceptor{outermost{s.Served}}
		if s.Locker != nil {
			lk, err := connectlock.New(s.Locker, suiteOptions.For(s)...)
			if err != nil {
				t.Fatalf("connectlock.New: %v", err)
			}
			ics = append(ics, lk)
		}
		opts := []connect.HandlerOption{connect.WithInterceptors(ics...)}
		if s.PlainCodecs {
			opts = append(opts, connectlock.PlainCodecs())
		}
		srv := serve(t, s.Service, p, opts...)
		c := suiteClient{srv: srv, methods: map[string]*connect.Client[testpb.OrderRequest, testpb.OrderReply]{}}
		for _, m := range []string{"Order", "Quick", "Nested", "Relaxed", "Plain"} {
			c.methods[m] = connect.NewClient[testpb.OrderRequest, testpb.OrderReply](srv.http, srv.baseURL+rpcsuite.FullMethod(m), p.opts...)
		}
		return c
	}}
}

// buildSuite is the stacks' rpcsuite.Stack.Build: connectlock.New's error.
func buildSuite(l *core.Locker, s rpcsuite.Server) error {
	_, err := connectlock.New(l, suiteOptions.For(s)...)
	return err
}

// suiteClient is the suite's client: a Connect client per unary method;
// a rpcsuite.RawClient.
type suiteClient struct {
	srv     *server
	methods map[string]*connect.Client[testpb.OrderRequest, testpb.OrderReply]
}

var _ rpcsuite.RawClient = suiteClient{}

func (c suiteClient) Call(ctx context.Context, method string, req *testpb.OrderRequest, md ...string) rpcsuite.Reply {
	cl := c.methods[method]
	if cl == nil {
		return rpcsuite.Reply{Code: rpcsuite.Unimplemented, Message: "no client for " + method, Err: errors.New("no client for " + method)}
	}
	r := connect.NewRequest(req)
	setMD(r.Header(), md...)
	ctx, s := record(ctx)
	resp, err := cl.CallUnary(ctx, r)
	if err == nil {
		return s.retryAfter(rpcsuite.Reply{Code: rpcsuite.OK, Msg: resp.Msg})
	}
	return s.retryAfter(replyOf(err))
}

// CallRaw sends body as the request of method, through a client whose
// codec named codec ("json" or "proto") writes body as it is.
func (c suiteClient) CallRaw(ctx context.Context, method, codec string, body []byte) rpcsuite.Reply {
	opts := append(slices.Clone(c.srv.p.opts), connect.WithCodec(rawCodec{name: codec, body: body}))
	cl := connect.NewClient[testpb.OrderRequest, testpb.OrderReply](c.srv.http, c.srv.baseURL+rpcsuite.FullMethod(method), opts...)
	ctx, s := record(ctx)
	resp, err := cl.CallUnary(ctx, connect.NewRequest(&testpb.OrderRequest{}))
	if err == nil {
		return s.retryAfter(rpcsuite.Reply{Code: rpcsuite.OK, Msg: resp.Msg})
	}
	return s.retryAfter(replyOf(err))
}

// rawCodec is a client codec that sends body whatever the request, and
// decodes replies as the codec it is named after (JSON or binary).
type rawCodec struct {
	name string
	body []byte
}

func (c rawCodec) Name() string                { return c.name }
func (c rawCodec) Marshal(any) ([]byte, error) { return c.body, nil }
func (c rawCodec) Unmarshal(data []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return errors.New("not a protobuf message")
	}
	if c.name == "json" {
		return protojson.Unmarshal(data, pm)
	}
	return proto.Unmarshal(data, pm)
}

// setMD sets the name, value pairs md in h; a name ending in "-bin" gets
// its value base64-encoded, as gRPC metadata would be.
func setMD(h http.Header, md ...string) {
	for i := 0; i+1 < len(md); i += 2 {
		v := md[i+1]
		if strings.HasSuffix(strings.ToLower(md[i]), "-bin") {
			v = connect.EncodeBinaryHeader([]byte(v))
		}
		h.Add(md[i], v)
	}
}

// replyOf is what the suite reads of a client's error.
func replyOf(err error) rpcsuite.Reply {
	r := rpcsuite.Reply{Code: codeOf(err), Message: err.Error(), Err: err}
	var ce *connect.Error
	if errors.As(err, &ce) {
		r.Message = ce.Message()
		for _, d := range ce.Details() {
			if v, derr := d.Value(); derr == nil {
				if ri, ok := v.(*errdetails.RetryInfo); ok {
					r.RetryInfo, r.RetryDelay = true, ri.GetRetryDelay().AsDuration()
				}
			}
		}
	}
	return r
}

// env is one connectlock-specific test's world: its rpcsuite.Env (a real
// Redis, a Locker with the test's own prefix, the suite's service) served
// on a real server behind the interceptor, and a client (HTTP/2 without
// TLS, Connect protocol).
type env struct {
	*rpcsuite.Env
	srv    *server
	client testpbconnect.OrdersClient
}

// newEnv serves the test service behind the interceptor built with opts.
func newEnv(t testing.TB, opts ...connectlock.Option) *env {
	t.Helper()
	e := newBase(t)
	lk, err := connectlock.New(e.Locker, opts...)
	if err != nil {
		t.Fatalf("connectlock.New: %v", err)
	}
	e.serve(t, connect.WithInterceptors(lk))
	return e
}

// newBase starts Redis and a Locker on it with the test's own prefix and
// opts (after the prefix).
func newBase(t testing.TB, opts ...core.Option) *env {
	t.Helper()
	return &env{Env: rpcsuite.NewEnv(t, "connectlock", opts...)}
}

func (e *env) serve(t testing.TB, opts ...connect.HandlerOption) {
	t.Helper()
	e.srv = serve(t, e.Service, connectH2C, opts...)
	e.client = e.srv.client()
}
