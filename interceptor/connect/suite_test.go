package connectlock_test

import (
	"errors"
	"testing"

	"connectrpc.com/connect"

	connectlock "github.com/lockgate/lockgate/interceptor/connect"
	"github.com/lockgate/lockgate/internal/rpclock"
	"github.com/lockgate/lockgate/internal/rpcsuite"
)

// TestSuite runs the behaviour both RPC interceptors share
// (internal/rpcsuite) against connectlock, in each protocol a Connect
// handler serves: Connect over HTTP/1.1, gRPC over HTTP/2 without TLS,
// gRPC-Web over HTTP/1.1.
func TestSuite(t *testing.T) {
	for _, p := range []protocol{connectHTTP1, grpcH2C, grpcWebHTTP1} {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			rpcsuite.Run(t, connectStack(p))
		})
	}
}

// TestFailureCodes: every outcome core reports maps to the Connect code
// that says what happened (the package doc's table), fail-open applies to
// a Redis that is unavailable only, and error text from core and Redis
// reaches the logger but never the client (rpcsuite.RunFailures, on
// failureError).
func TestFailureCodes(t *testing.T) { rpcsuite.RunFailures(t, "connectlock", failureReply) }

// failureReply is failureError(f), which must be a *connect.Error, read
// as the suite's client reads an error.
func failureReply(t testing.TB, f *rpclock.Failure) rpcsuite.Reply {
	t.Helper()
	err := connectlock.FailureError(f)
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatal("not a *connect.Error")
	}
	return replyOf(err)
}
