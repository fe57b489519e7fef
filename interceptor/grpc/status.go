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

// contextErr returns the context error err carries (context.Canceled or
// context.DeadlineExceeded), or nil.
func contextErr(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return context.Canceled
	}
	return nil
}

// lockStatus maps a Lock error to a status that says what happened. Error
// text from core and Redis goes to the logger, never to the client.
//
//   - ErrUnavailable, also joined with the context's error: Unavailable
//     (Redis did not answer; whether the lock is free is unknown);
//   - ErrClosed: Unavailable, "shutting down";
//   - ErrUnsupported: Unavailable, logged at error (a deployment problem);
//   - ErrNotObtained joined with the context's error: the context's status
//     (Canceled or DeadlineExceeded), since the caller gave up first;
//   - ErrNotObtained: ResourceExhausted with a RetryInfo;
//   - a plain context error: Canceled or DeadlineExceeded;
//   - anything else (ErrInvalid, ...): Internal, logged at error.
func (i *Interceptor) lockStatus(ctx context.Context, m *method, err error) error {
	switch {
	case errors.Is(err, core.ErrUnavailable):
		i.logger.ErrorContext(ctx, "grpclock: redis unavailable", "method", m.name, "error", err)
		return status.Errorf(codes.Unavailable, "%s: lock service unavailable, please retry later", m.name)
	case errors.Is(err, core.ErrClosed):
		return status.Errorf(codes.Unavailable, "%s: lock service shutting down", m.name)
	case errors.Is(err, core.ErrUnsupported):
		i.logger.ErrorContext(ctx, "grpclock: redis server not supported", "method", m.name, "error", err)
		return status.Errorf(codes.Unavailable, "%s: lock service unavailable", m.name)
	case contextErr(err) != nil:
		// ErrNotObtained joined with the context's error, or the
		// context's error alone: the caller's budget ended.
		return status.FromContextError(contextErr(err)).Err()
	case errors.Is(err, core.ErrNotObtained):
		return busyStatus(m, err)
	}
	i.logger.ErrorContext(ctx, "grpclock: lock failed", "method", m.name, "error", err)
	return status.Errorf(codes.Internal, "%s: internal error", m.name)
}

// busyStatus is ResourceExhausted with a RetryInfo carrying core's estimate
// of when the lock is likely free (core.RetryAfter: not the holder's TTL,
// which only bounds it).
func busyStatus(m *method, err error) error {
	st := status.Newf(codes.ResourceExhausted, "%s is busy: another call holds its lock, please retry later", m.name)
	if d, ok := core.RetryAfter(err); ok {
		if ds, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)}); derr == nil {
			st = ds
		}
	}
	return st.Err()
}
