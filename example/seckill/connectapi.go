package seckill

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lockgate/lockgate/core"
	seckillv1 "github.com/lockgate/lockgate/example/proto/seckill/v1"
	"github.com/lockgate/lockgate/example/proto/seckill/v1/seckillv1connect"
	connectlock "github.com/lockgate/lockgate/interceptor/connect"
)

// NewConnectHandler returns seckill.v1.Seckill/Order as a Connect handler
// (connectrpc.com/connect: the Connect, gRPC and gRPC-Web protocols) on
// its path, "/seckill.v1.Seckill/Order", with the same checks, lock and
// outcomes as NewGRPCServer: the call is first checked
// (CodeInvalidArgument naming the field, CodeNotFound; nothing locked),
// then, with LockRedis, locked by connectlock from the same
// (lockgate.v1.lock) annotation "order:{user_id}:{voucher_id}" as grpclock
// — the same Redis lock as gRPC and HTTP, so a node serving the three
// gives one user one order whichever way the duplicates come —, or with
// LockLocal by the in-process mutex. Busy is CodeResourceExhausted with a
// RetryInfo, Redis down CodeUnavailable; a request body over
// cfg.BodyLimit is refused (CodeResourceExhausted). With cfg.Tracer the
// call runs in a server span first (tracing.go). Serve it with
// NewConnectServer (HTTP/1.1 and h2c, the timeouts). Errors: as
// NewFiberApp, and connectlock's for a bad annotation.
func NewConnectHandler(cfg Config) (http.Handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// The first interceptor is the outermost.
	var chain []connect.Interceptor
	if cfg.Tracer != nil {
		chain = append(chain, connect.UnaryInterceptorFunc(cfg.connectTrace))
	}
	chain = append(chain, connect.UnaryInterceptorFunc(cfg.connectValidate))
	switch cfg.Mode {
	case LockRedis:
		// cfg.Wait and cfg.TTL, as on gRPC and the HTTP routes (an
		// annotation's own wait or ttl would win).
		lk, err := connectlock.New(cfg.Locker, connectlock.WithLogger(cfg.Logger),
			connectlock.WithLockOptions(core.WithWait(cfg.Wait), core.WithTTL(cfg.TTL)))
		if err != nil {
			return nil, err
		}
		chain = append(chain, lk)
	case LockLocal:
		chain = append(chain, connect.UnaryInterceptorFunc(cfg.connectLocal))
	}
	mux := http.NewServeMux()
	mux.Handle(seckillv1connect.NewSeckillHandler(connectSeckill{cfg: cfg},
		connect.WithInterceptors(chain...), connect.WithReadMaxBytes(cfg.BodyLimit),
		// A body that does not decode: "invalid request body" (naming the
		// field when known), never a Go type.
		connectlock.PlainCodecs()))
	return mux, nil
}

// NewConnectServer returns the http.Server of `seckill serve
// -connect-addr`: NewConnectHandler(cfg) over HTTP/1.1 (the Connect
// protocol, gRPC-Web) and unencrypted HTTP/2 with prior knowledge (h2c,
// which gRPC clients speak), both from net/http's own server
// (http.Server.Protocols, Go 1.24 and later: no golang.org/x/net/h2c),
// with cfg.Timeouts and MaxHeaderBytes as NewHTTPServer (over HTTP/2 the
// read and write timeouts bound each call). Call Serve with a listener.
// Errors: as NewConnectHandler.
func NewConnectServer(cfg Config) (*http.Server, error) {
	srv, err := newNetHTTPServer(cfg, NewConnectHandler)
	if err != nil {
		return nil, err
	}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	return srv, nil
}

// connectValidate checks the ids and the voucher before any lock
// (rpcCheck, as gRPC).
func (cfg Config) connectValidate(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if r, ok := req.Any().(*seckillv1.OrderRequest); ok {
			if code, msg := cfg.rpcCheck(ctx, r); code != codes.OK {
				return nil, connectError(code, msg)
			}
		}
		return next(ctx, req)
	}
}

// connectLocal is the in-process lock of LockLocal for Connect calls.
func (cfg Config) connectLocal(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		r, ok := req.Any().(*seckillv1.OrderRequest)
		if !ok {
			return next(ctx, req)
		}
		unlock, ok := cfg.lockLocal(ctx, ids{user: r.GetUserId(), voucher: r.GetVoucherId()})
		if !ok {
			return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%s: lock busy, retry later", req.Spec().Procedure))
		}
		defer unlock()
		return next(ctx, req)
	}
}

// connectError is the Connect error of a gRPC code and message: Connect's
// codes are gRPC's, number for number.
func connectError(code codes.Code, msg string) error {
	return connect.NewError(connect.Code(code), errors.New(msg))
}

// connectSeckill is the Connect implementation of seckill.v1.Seckill.
type connectSeckill struct {
	seckillv1connect.UnimplementedSeckillHandler
	cfg Config
}

// Order runs with ctx derived from the lease's context under LockRedis
// (connectlock.FromContext returns the lease).
func (s connectSeckill) Order(ctx context.Context, req *connect.Request[seckillv1.OrderRequest]) (*connect.Response[seckillv1.OrderReply], error) {
	id, err := s.cfg.Service.Order(ctx, req.Msg.GetUserId(), req.Msg.GetVoucherId())
	if err != nil {
		code, msg := s.cfg.rpcOutcome(ctx, err)
		cerr := connect.NewError(connect.Code(code), errors.New(msg))
		if d := orderRetryDelay(err); d > 0 {
			if detail, derr := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)}); derr == nil {
				cerr.AddDetail(detail)
			}
			cerr.Meta().Set("Retry-After", orderRetryAfter(err))
		}
		return nil, cerr
	}
	return connect.NewResponse(&seckillv1.OrderReply{OrderId: id}), nil
}
