package fiberlockfx_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/lockgate/lockgate/internal/locktest"
)

func TestMain(m *testing.M) {
	locktest.VerifyTestMain(m,
		// fasthttp refreshes its cached Date header in a goroutine started
		// once per process and never stopped.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
	)
}
