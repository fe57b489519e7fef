package grpclock

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// keyStatus maps a key error to InvalidArgument. keyfunc errors name the
// placeholder and never carry the value, so their text is safe to send.
func keyStatus(m *method, err error) error {
	var ke *keyfunc.Error
	if errors.As(err, &ke) {
		return status.Errorf(codes.InvalidArgument, "%s: invalid lock key: %s", m.name, ke.Error())
	}
	return status.Errorf(codes.InvalidArgument, "%s: invalid lock key", m.name)
}

// lockStatus maps a Lock error to a status. Internal error text goes to
// the logger, never to the client.
func (i *Interceptor) lockStatus(ctx context.Context, m *method, err error) error {
	switch {
	case errors.Is(err, core.ErrNotObtained) && ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case errors.Is(err, core.ErrNotObtained):
		return busyStatus(m, err)
	case errors.Is(err, core.ErrUnavailable):
		i.logger.ErrorContext(ctx, "grpclock: redis unavailable", "method", m.name, "error", err)
		return status.Errorf(codes.Unavailable, "%s: lock service unavailable, please retry later", m.name)
	case errors.Is(err, core.ErrClosed):
		return status.Errorf(codes.Unavailable, "%s: lock service shutting down", m.name)
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	}
	i.logger.ErrorContext(ctx, "grpclock: lock failed", "method", m.name, "error", err)
	return status.Errorf(codes.Internal, "%s: internal error", m.name)
}

// busyStatus is ResourceExhausted with a RetryInfo carrying the holder's
// remaining TTL, when known.
func busyStatus(m *method, err error) error {
	st := status.Newf(codes.ResourceExhausted, "%s is busy: another call holds its lock, please retry later", m.name)
	if d, ok := core.RetryAfter(err); ok {
		if ds, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)}); derr == nil {
			st = ds
		}
	}
	return st.Err()
}
