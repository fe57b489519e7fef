package rpclock_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/lockhttp"
	"github.com/lockgate/lockgate/internal/rpclock"
)

// TestUnavailableRetryAfterIsTheHTTPAdapters: an Unavailable RPC answer
// asks for the pause the HTTP adapters' 503 asks for with Retry-After.
func TestUnavailableRetryAfterIsTheHTTPAdapters(t *testing.T) {
	if got := strconv.Itoa(int(rpclock.UnavailableRetryAfter / time.Second)); got != lockhttp.UnavailableRetryAfter {
		t.Fatalf("rpclock.UnavailableRetryAfter %v, lockhttp's 503 Retry-After %q", rpclock.UnavailableRetryAfter, lockhttp.UnavailableRetryAfter)
	}
}
