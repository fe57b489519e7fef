package grpclock

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/lockgate/lockgate/internal/rpclock"
)

// stream hands the handler the lease's context and, for server-streaming
// methods, the request the interceptor already received.
type stream struct {
	grpc.ServerStream
	ctx   context.Context
	first proto.Message // received by the interceptor, not yet handed on
}

// Context returns the lease's context (or the stream's, when fail-open).
func (s *stream) Context() context.Context { return s.ctx }

// RecvMsg returns the request received by the interceptor on the first
// call, then reads from the stream.
func (s *stream) RecvMsg(m any) error {
	if s.first == nil {
		return s.ServerStream.RecvMsg(m)
	}
	first := s.first
	s.first = nil
	// Same message, maybe another Go type (a dynamic one, see WithFiles):
	// HandOn then copies through the wire format.
	if err := rpclock.HandOn(m, first); err != nil {
		return status.Error(codes.Internal, "grpclock: "+err.Error())
	}
	return nil
}
