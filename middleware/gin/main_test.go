package ginlock_test

import (
	"io"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/lockgate/lockgate/internal/locktest"
)

// TestMain keeps Gin quiet (test mode: no debug route dump; recovery's
// stack traces of the panic tests discarded) and checks that no goroutine
// outlives the tests. Gin starts none of its own, so nothing is ignored.
func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	gin.DefaultErrorWriter = io.Discard // read by gin.Recovery() when it is built
	locktest.VerifyTestMain(m)
}
