package grpclock

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lockgate/lockgate/internal/rpclock"
)

// failureStatus maps a failed acquisition (rpclock.Gate.Acquire, which
// also logs what the client is not told) to the status that says what
// happened:
//
//   - an invalid key: InvalidArgument naming the placeholder;
//   - busy: ResourceExhausted with a RetryInfo carrying core's estimate of
//     when the lock is likely free (core.RetryAfter: not the holder's TTL,
//     which only bounds it);
//   - Redis unavailable, the Locker shutting down, an unsupported server:
//     Unavailable with a RetryInfo of one second
//     (rpclock.UnavailableRetryAfter: the Retry-After of the HTTP adapters'
//     503);
//   - the call's context ended first: Canceled or DeadlineExceeded;
//   - anything else: Internal, with a generic message.
func failureStatus(f *rpclock.Failure) error {
	switch f.Outcome {
	case rpclock.InvalidKey:
		return status.Error(codes.InvalidArgument, f.Message)
	case rpclock.Busy:
		return withRetryInfo(status.New(codes.ResourceExhausted, f.Message), f).Err()
	case rpclock.Unavailable:
		return withRetryInfo(status.New(codes.Unavailable, f.Message), f).Err()
	case rpclock.Canceled, rpclock.DeadlineExceeded:
		return status.FromContextError(f.Err).Err()
	}
	return status.Error(codes.Internal, f.Message)
}

// withRetryInfo adds to st a RetryInfo of f's RetryAfter, if f has one.
func withRetryInfo(st *status.Status, f *rpclock.Failure) *status.Status {
	if !f.HasRetryAfter {
		return st
	}
	if ds, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(f.RetryAfter)}); err == nil {
		return ds
	}
	return st
}
