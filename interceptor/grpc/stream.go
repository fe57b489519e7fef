package grpclock

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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
	dst, ok := m.(proto.Message)
	if !ok {
		return status.Error(codes.Internal, "grpclock: request is not a protobuf message")
	}
	if dst.ProtoReflect().Descriptor() == first.ProtoReflect().Descriptor() {
		proto.Reset(dst)
		proto.Merge(dst, first)
		return nil
	}
	// Same message, another Go type (a dynamic one, see WithFiles): copy
	// through the wire format.
	b, err := proto.Marshal(first)
	if err != nil {
		return status.Error(codes.Internal, "grpclock: cannot hand on the request")
	}
	if err := proto.Unmarshal(b, dst); err != nil {
		return status.Error(codes.Internal, "grpclock: cannot hand on the request")
	}
	return nil
}
