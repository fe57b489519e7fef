package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/lockgate/lockgate/internal/locktest"
)

// TestMain doubles as the seckill binary: with SECKILL_TEST_MAIN=1 the
// test executable runs the command line it was given, so the tests (and
// the demo's child processes, which inherit the variable) run the real
// commands as separate processes without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("SECKILL_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:]))
	}
	locktest.VerifyTestMain(m,
		// The in-process servers of hostile_test.go: fasthttp (under fiber)
		// starts one process-wide goroutine that refreshes the Date header
		// every second and never stops, and its worker-pool cleaner sleeps
		// up to 10s before it sees that the server was shut down.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	)
}
