package connectlock_test

import (
	"testing"

	"github.com/lockgate/lockgate/internal/rpcsuite"
)

// TestSuite runs the behaviour both RPC interceptors share
// (internal/rpcsuite) against connectlock, in each protocol a Connect
// handler serves: Connect over HTTP/1.1, gRPC over HTTP/2 without TLS,
// gRPC-Web over HTTP/1.1.
func TestSuite(t *testing.T) {
	for _, p := range []protocol{connectHTTP1, grpcH2C, grpcWebHTTP1} {
		t.Run(p.name, func(t *testing.T) { rpcsuite.Run(t, connectStack(p)) })
	}
}
