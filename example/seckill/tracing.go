package seckill

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
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
// or query's values (the user id is request data).

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
	f.c.Request().Header.VisitAll(func(k, _ []byte) { keys = append(keys, string(k)) })
	return keys
}

// httpTrace is fiberTrace for net/http: the route is the ServeMux
// pattern, without its method.
func (cfg Config) httpTrace(method, route string, next http.Handler) http.Handler {
	if cfg.Tracer == nil {
		return next
	}
	name := method + " " + route
	opts := serverSpanOptions(attribute.String("http.request.method", method), attribute.String("http.route", route))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := cfg.Tracer.Start(ctx, name, opts...)
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
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
