package grpclock_test

import (
	"testing"

	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
	"github.com/lockgate/lockgate/internal/rpclock"
	"github.com/lockgate/lockgate/internal/rpcsuite"
)

// TestSuite runs the behaviour both RPC interceptors share
// (internal/rpcsuite) against grpclock on grpc-go.
func TestSuite(t *testing.T) { rpcsuite.Run(t, grpcStack) }

// TestLockStatusMapping: every outcome core reports maps to the status
// that says what happened, fail-open applies to a Redis that is
// unavailable only, and error text from core and Redis reaches the logger
// but never the client (rpcsuite.RunFailures, on failureStatus).
func TestLockStatusMapping(t *testing.T) { rpcsuite.RunFailures(t, "grpclock", failureReply) }

// failureReply is failureStatus(f), read as the suite's client reads a
// status.
func failureReply(_ testing.TB, f *rpclock.Failure) rpcsuite.Reply {
	return replyOf(grpclock.FailureStatus(f))
}
