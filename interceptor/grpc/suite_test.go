package grpclock_test

import (
	"testing"

	"github.com/lockgate/lockgate/internal/rpcsuite"
)

// TestSuite runs the behaviour both RPC interceptors share
// (internal/rpcsuite) against grpclock on grpc-go.
func TestSuite(t *testing.T) { rpcsuite.Run(t, grpcStack) }
