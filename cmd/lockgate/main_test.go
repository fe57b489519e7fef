package main

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/locktest"
)

// TestMain quiets go-redis as main does, and fails the run if a test
// leaves a goroutine behind (a Locker, lease or client not closed, by the
// tests or by run).
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	locktest.VerifyTestMain(m)
}
