package grpclock_test

import (
	"testing"

	"github.com/lockgate/lockgate/internal/locktest"
)

func TestMain(m *testing.M) { locktest.VerifyTestMain(m) }
