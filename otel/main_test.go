package otellock_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests, stops the benchmark's server, and fails the run
// if any goroutine is left behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchSrv != nil {
		benchSrv.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
