package seckill

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lockgate/lockgate/core"
	seckillv1 "github.com/lockgate/lockgate/example/proto/seckill/v1"
	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
)

// NewGRPCServer returns a gRPC server with seckill.v1.Seckill/Order and
// server reflection (NewConnectServer serves the same service over
// Connect, locked alike by connectlock). The call is first checked
// (INVALID_ARGUMENT naming the field, NOT_FOUND for an unknown voucher;
// nothing locked), then, with LockRedis, locked by grpclock from the
// method's (lockgate.v1.lock) annotation "order:{user_id}:{voucher_id}" —
// the same lock as the HTTP route — or with LockLocal by the in-process
// mutex. With cfg.Tracer the call runs in a server span first
// (tracing.go). Errors: as NewFiberApp, and grpclock's for a bad
// annotation.
func NewGRPCServer(cfg Config) (*grpc.Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var chain []grpc.UnaryServerInterceptor
	if cfg.Tracer != nil {
		chain = append(chain, cfg.grpcTrace)
	}
	chain = append(chain, cfg.grpcValidate)
	switch cfg.Mode {
	case LockRedis:
		// cfg.Wait and cfg.TTL, as on the HTTP routes (an annotation's own
		// wait or ttl would win); before, gRPC took the Locker's defaults.
		ic, err := grpclock.New(cfg.Locker, grpclock.WithLogger(cfg.Logger),
			grpclock.WithLockOptions(core.WithWait(cfg.Wait), core.WithTTL(cfg.TTL)))
		if err != nil {
			return nil, err
		}
		chain = append(chain, ic.Unary())
	case LockLocal:
		chain = append(chain, cfg.grpcLocal)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(chain...))
	seckillv1.RegisterSeckillServer(srv, grpcSeckill{cfg: cfg})
	reflection.Register(srv)
	return srv, nil
}

// grpcValidate checks the ids and the voucher before any lock.
func (cfg Config) grpcValidate(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	r, ok := req.(*seckillv1.OrderRequest)
	if !ok {
		return next(ctx, req)
	}
	if code, msg := cfg.rpcCheck(ctx, r); code != codes.OK {
		return nil, status.Error(code, msg)
	}
	return next(ctx, req)
}

// rpcCheck is the check of an Order call, gRPC or Connect, before any
// lock: INVALID_ARGUMENT naming the field, NOT_FOUND, or the store's
// failure; OK to go on.
func (cfg Config) rpcCheck(ctx context.Context, r *seckillv1.OrderRequest) (codes.Code, string) {
	if r.GetUserId() <= 0 {
		return codes.InvalidArgument, "user_id must be a positive integer"
	}
	if r.GetVoucherId() <= 0 {
		return codes.InvalidArgument, "voucher_id must be a positive integer"
	}
	exists, err := cfg.Service.Store.VoucherExists(ctx, r.GetVoucherId())
	if err != nil {
		return cfg.rpcOutcome(ctx, err)
	}
	if !exists {
		return codes.NotFound, MsgUnknownVoucher
	}
	return codes.OK, ""
}

// grpcLocal is the in-process lock of LockLocal for gRPC calls.
func (cfg Config) grpcLocal(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	r, ok := req.(*seckillv1.OrderRequest)
	if !ok {
		return next(ctx, req)
	}
	unlock, ok := cfg.lockLocal(ctx, ids{user: r.GetUserId(), voucher: r.GetVoucherId()})
	if !ok {
		return nil, status.Error(codes.ResourceExhausted, fmt.Sprintf("%s: lock busy, retry later", info.FullMethod))
	}
	defer unlock()
	return next(ctx, req)
}

type grpcSeckill struct {
	seckillv1.UnimplementedSeckillServer
	cfg Config
}

// Order runs with ctx derived from the lease's context under LockRedis.
func (s grpcSeckill) Order(ctx context.Context, r *seckillv1.OrderRequest) (*seckillv1.OrderReply, error) {
	id, err := s.cfg.Service.Order(ctx, r.GetUserId(), r.GetVoucherId())
	if err != nil {
		return nil, s.cfg.grpcStatus(ctx, err)
	}
	return &seckillv1.OrderReply{OrderId: id}, nil
}

// grpcStatus maps an order outcome to a gRPC status (rpcOutcome), with a
// RetryInfo (orderRetryDelay) when the client should come back.
func (cfg Config) grpcStatus(ctx context.Context, err error) error {
	st := status.New(cfg.rpcOutcome(ctx, err))
	if d := orderRetryDelay(err); d > 0 {
		if with, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)}); derr == nil {
			st = with
		}
	}
	return st.Err()
}

// orderRetryDelay is the RetryInfo delay of an order's error, 0 for none:
// core's estimate for a busy write permit (core.RetryAfter, at least 1s as
// orderRetryAfter rounds it), 1s when Redis was unavailable.
func orderRetryDelay(err error) time.Duration {
	switch {
	case errors.Is(err, core.ErrNotObtained):
		d, _ := core.RetryAfter(err)
		return max(d, time.Second)
	case errors.Is(err, core.ErrUnavailable):
		return time.Second
	}
	return 0
}

// rpcOutcome maps an order outcome to a gRPC code (Connect's codes are
// the same numbers) and the client's message; internal errors are
// logged, never sent.
func (cfg Config) rpcOutcome(ctx context.Context, err error) (codes.Code, string) {
	switch {
	case errors.Is(err, ErrAlreadyPurchased):
		return codes.AlreadyExists, MsgAlreadyPurchased
	case errors.Is(err, ErrOutOfStock):
		return codes.FailedPrecondition, MsgOutOfStock
	case errors.Is(err, ErrUnknownVoucher):
		return codes.NotFound, MsgUnknownVoucher
	case errors.Is(err, ErrStaleFence), errors.Is(context.Cause(ctx), core.ErrLockLost), errors.Is(err, core.ErrLockLost):
		return codes.Aborted, MsgStaleFence
	case errors.Is(err, core.ErrNotObtained):
		// No write permit (Service.WriteLimit) within its wait.
		return codes.ResourceExhausted, MsgBusy
	case errors.Is(err, core.ErrUnavailable):
		cfg.Logger.Warn("seckill: write permit unavailable", "err", err)
		return codes.Unavailable, MsgUnavailable
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return codes.Canceled, "canceled"
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		// The request's deadline cut the call (a DB call stopped by a
		// 1-5ms deadline): the client's budget, not a server fault.
		cfg.Logger.Info("seckill: order stopped by the request's deadline", "err", err)
		return codes.DeadlineExceeded, "deadline exceeded"
	}
	cfg.Logger.Error("seckill: order failed", "err", err)
	return codes.Internal, MsgInternal
}
