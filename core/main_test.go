package core_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests, stops the benchmarks' shared server, and fails
// the run if any goroutine is left behind (but go-redis's dial prober).
//
// The tests run side by side (t.Parallel), each on redis-servers of its
// own: most of their time is waiting (a failover, a TTL, a paused server).
// The few that count the process's goroutines or allocations, measure
// latency in round trips or bound a time within tens of milliseconds, or
// change a package setting (SetIdleStop) run alone, before the others.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchSrv != nil {
		benchSrv.Close()
	}
	if code == 0 {
		// go-redis probes an address once a second after its pool's dials
		// failed as many times as the pool has connections (a Cluster node
		// killed for good), and that goroutine ends at its next probe after
		// the client is closed: up to a second after the last test.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
