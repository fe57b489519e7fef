package seckill

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/lockgate/lockgate/internal/locktest"
)

func TestMain(m *testing.M) {
	locktest.VerifyTestMain(m,
		// fasthttp (under fiber) starts one process-wide goroutine that
		// refreshes the Date header every second and never stops.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// fasthttp's worker-pool cleaner sleeps up to 10s before it sees
		// that the server was shut down, then exits.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	)
}
