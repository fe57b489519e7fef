package otellock_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine is left behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
