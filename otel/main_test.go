package otellock_test

import (
	"testing"

	"github.com/lockgate/lockgate/internal/locktest"
)

// TestMain fails the run if any goroutine is left behind.
func TestMain(m *testing.M) { locktest.VerifyTestMain(m) }
