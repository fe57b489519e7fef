package ginlock

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/lockgate/lockgate/internal/lockhttp"
)

// StatusClientClosedRequest (499, "client closed request", as nginx logs
// it) answers a request whose context was cancelled while it waited for
// the lock: the client went away, so nobody reads the answer, but the
// access log tells it apart from a server failure.
const StatusClientClosedRequest = lockhttp.StatusClientClosedRequest

// jsonError aborts with status and {"error": msg}.
func jsonError(c *gin.Context, status int, msg string) {
	c.Header("X-Content-Type-Options", "nosniff")
	c.AbortWithStatusJSON(status, gin.H{"error": msg})
}

func defaultBusy(c *gin.Context) {
	jsonError(c, http.StatusTooManyRequests, lockhttp.MsgBusy)
}

func defaultError(c *gin.Context, status int, err error) {
	jsonError(c, status, lockhttp.Message(status, err))
}
