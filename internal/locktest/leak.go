package locktest

import (
	"testing"

	"go.uber.org/goleak"
)

// VerifyTestMain is goleak.VerifyTestMain, ignoring go-redis's dial
// prober as well: after a client's dials failed as many times as its pool
// has connections (a refused or killed Redis), go-redis probes the address
// once a second, and that goroutine ends at its next probe after the
// client is closed, up to a second after the last test (tests side by side
// end together).
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	goleak.VerifyTestMain(m, append(opts, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))...)
}
