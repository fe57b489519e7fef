package seckill

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	fiberv3 "github.com/gofiber/fiber/v3"
	"github.com/labstack/echo/v4"
	echov5 "github.com/labstack/echo/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The server spans of Config.Tracer. An order runs in a span of its own,
// started before the ids are checked and the lock is taken, so the lock's
// span ("lock <key template>", otellock) is its child, and a waiter's lock
// span links to the holder's order span (otellock's holder tag). A client's
// W3C traceparent header (gRPC: metadata) is continued. Span names and
// attributes carry the route, the method and the status, never the path's
// or query's values (the user id is request data). Each stack has its own
// middleware, first on the order route, that puts the span's context where
// the stack's lock adapter reads the request's context: c.SetUserContext
// (Fiber v2), c.SetContext (Fiber v3), r.WithContext (net/http, chi, and
// c.Request for Gin, c.SetRequest for Echo); gRPC and Connect pass ctx on.

// propagator reads the caller's trace context.
var propagator = propagation.TraceContext{}

// httpSpanStatus sets the span's status code attribute, and its status to
// Error for a 5xx answer (a 4xx is the client's: OpenTelemetry leaves a
// server span's status unset then).
func httpSpanStatus(span trace.Span, code int) {
	span.SetAttributes(attribute.Int("http.response.status_code", code))
	if code >= 500 {
		span.SetStatus(codes.Error, http.StatusText(code))
	}
}

func serverSpanOptions(attrs ...attribute.KeyValue) []trace.SpanStartOption {
	return []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...)}
}

// fiberTrace runs the rest of route's chain in a server span
// "<method> <route>"; it needs cfg.Tracer.
func (cfg Config) fiberTrace(method, route string) fiber.Handler {
	name := method + " " + route
	opts := serverSpanOptions(attribute.String("http.request.method", method), attribute.String("http.route", route))
	return func(c *fiber.Ctx) error {
		ctx := propagator.Extract(c.UserContext(), fiberCarrier{c})
		ctx, span := cfg.Tracer.Start(ctx, name, opts...)
		defer span.End()
		c.SetUserContext(ctx)
		err := c.Next()
		code := c.Response().StatusCode()
		if err != nil {
			// fiberError writes the answer after the chain returns.
			code = fiber.StatusInternalServerError
			var fe *fiber.Error
			if errors.As(err, &fe) {
				code = fe.Code
			}
		}
		httpSpanStatus(span, code)
		return err
	}
}

// fiberCarrier reads the request headers for the propagator.
type fiberCarrier struct{ c *fiber.Ctx }

func (f fiberCarrier) Get(key string) string { return f.c.Get(key) }
func (f fiberCarrier) Set(string, string)    {} // extraction only
func (f fiberCarrier) Keys() []string {
	var keys []string
	for k := range f.c.Request().Header.All() {
		keys = append(keys, string(k))
	}
	return keys
}

// fiberV3Trace is fiberTrace on Fiber v3: the span's context becomes the
// request context (c.SetContext), which fiberlock v3 derives the lease's
// from.
func (cfg Config) fiberV3Trace(method, route string) fiberv3.Handler {
	name := method + " " + route
	opts := serverSpanOptions(attribute.String("http.request.method", method), attribute.String("http.route", route))
	return func(c fiberv3.Ctx) error {
		ctx := propagator.Extract(c.Context(), fiberV3Carrier{c})
		ctx, span := cfg.Tracer.Start(ctx, name, opts...)
		defer span.End()
		c.SetContext(ctx)
		err := c.Next()
		code := c.Response().StatusCode()
		if err != nil {
			code = fiberv3.StatusInternalServerError
			var fe *fiberv3.Error
			if errors.As(err, &fe) {
				code = fe.Code
			}
		}
		httpSpanStatus(span, code)
		return err
	}
}

// fiberV3Carrier reads the request headers for the propagator.
type fiberV3Carrier struct{ c fiberv3.Ctx }

func (f fiberV3Carrier) Get(key string) string { return f.c.Get(key) }
func (f fiberV3Carrier) Set(string, string)    {} // extraction only
func (f fiberV3Carrier) Keys() []string {
	var keys []string
	for k := range f.c.Request().Header.All() {
		keys = append(keys, string(k))
	}
	return keys
}

// ginTrace is httpTrace on Gin: the span's context goes into c.Request,
// whose context ginlock derives the lease's from.
func (cfg Config) ginTrace(method, route string) gin.HandlerFunc {
	name := method + " " + route
	opts := serverSpanOptions(attribute.String("http.request.method", method), attribute.String("http.route", route))
	return func(c *gin.Context) {
		r, span := cfg.startHTTPSpan(c.Request, name, opts)
		defer span.End()
		c.Request = r
		c.Next()
		httpSpanStatus(span, c.Writer.Status())
	}
}

// startHTTPSpan starts the server span name for r, continuing the
// client's traceparent, and returns r with the span's context: the one the
// lock is taken with on the net/http stacks.
func (cfg Config) startHTTPSpan(r *http.Request, name string, opts []trace.SpanStartOption) (*http.Request, trace.Span) {
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := cfg.Tracer.Start(ctx, name, opts...)
	return r.WithContext(ctx), span
}

// echoTrace is httpTrace on Echo: the span's context goes into
// c.Request(), whose context echolock derives the lease's from.
func (cfg Config) echoTrace(method, route string) echo.MiddlewareFunc {
	name := method + " " + route
	opts := serverSpanOptions(attribute.String("http.request.method", method), attribute.String("http.route", route))
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r, span := cfg.startHTTPSpan(c.Request(), name, opts)
			defer span.End()
			c.SetRequest(r)
			err := next(c)
			code := c.Response().Status
			if err != nil && !c.Response().Committed {
				// The app's HTTPErrorHandler writes it after the chain.
				code = http.StatusInternalServerError
				var he *echo.HTTPError
				if errors.As(err, &he) {
					code = he.Code
				}
			}
			httpSpanStatus(span, code)
			return err
		}
	}
}

// echoV5Trace is echoTrace on Echo v5: the status is the one the answer
// has or will have (echo.ResolveResponseStatus: the app's HTTPErrorHandler
// writes a returned error after the chain).
func (cfg Config) echoV5Trace(method, route string) echov5.MiddlewareFunc {
	name := method + " " + route
	opts := serverSpanOptions(attribute.String("http.request.method", method), attribute.String("http.route", route))
	return func(next echov5.HandlerFunc) echov5.HandlerFunc {
		return func(c *echov5.Context) error {
			r, span := cfg.startHTTPSpan(c.Request(), name, opts)
			defer span.End()
			c.SetRequest(r)
			err := next(c)
			_, code := echov5.ResolveResponseStatus(c.Response(), err)
			httpSpanStatus(span, code)
			return err
		}
	}
}

// httpTrace is fiberTrace for net/http (and chi): the route is the
// ServeMux (or chi) pattern, without its method.
func (cfg Config) httpTrace(method, route string, next http.Handler) http.Handler {
	if cfg.Tracer == nil {
		return next
	}
	name := method + " " + route
	opts := serverSpanOptions(attribute.String("http.request.method", method), attribute.String("http.route", route))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, span := cfg.startHTTPSpan(r, name, opts)
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		httpSpanStatus(span, sw.code)
	})
}

// statusWriter records the status code of the answer.
type statusWriter struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.code, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// grpcTrace is the first interceptor with a Tracer: the call runs in a
// server span named by its full method.
func (cfg Config) grpcTrace(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	ctx = propagator.Extract(ctx, metadataCarrier(md))
	ctx, span := cfg.Tracer.Start(ctx, strings.TrimPrefix(info.FullMethod, "/"),
		serverSpanOptions(attribute.String("rpc.system", "grpc"), attribute.String("rpc.method", info.FullMethod))...)
	defer span.End()
	resp, err := next(ctx, req)
	code := status.Code(err)
	span.SetAttributes(attribute.String("rpc.grpc.status_code", code.String()))
	switch code {
	case grpccodes.Unknown, grpccodes.DeadlineExceeded, grpccodes.Unimplemented, grpccodes.Internal,
		grpccodes.Unavailable, grpccodes.DataLoss:
		span.SetStatus(codes.Error, code.String())
	}
	return resp, err
}

// connectTrace is grpcTrace for Connect, the first interceptor with a
// Tracer: the call (any of Connect's protocols) runs in a server span
// named by its procedure, continuing the traceparent request header.
func (cfg Config) connectTrace(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		procedure := req.Spec().Procedure
		ctx = propagator.Extract(ctx, propagation.HeaderCarrier(req.Header()))
		ctx, span := cfg.Tracer.Start(ctx, strings.TrimPrefix(procedure, "/"),
			serverSpanOptions(attribute.String("rpc.system", "connect_rpc"), attribute.String("rpc.method", procedure))...)
		defer span.End()
		resp, err := next(ctx, req)
		if err != nil {
			code := connect.CodeOf(err)
			span.SetAttributes(attribute.String("rpc.connect_rpc.error_code", code.String()))
			switch code {
			case connect.CodeUnknown, connect.CodeDeadlineExceeded, connect.CodeUnimplemented, connect.CodeInternal,
				connect.CodeUnavailable, connect.CodeDataLoss:
				span.SetStatus(codes.Error, code.String())
			}
		}
		return resp, err
	}
}

// metadataCarrier reads gRPC metadata for the propagator.
type metadataCarrier metadata.MD

func (m metadataCarrier) Get(key string) string {
	if v := metadata.MD(m).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}
func (m metadataCarrier) Set(string, string) {} // extraction only
func (m metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
