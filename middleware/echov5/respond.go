package echolock

import (
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/lockgate/lockgate/internal/lockhttp"
)

// StatusClientClosedRequest (499, "client closed request", as nginx logs
// it) answers a request whose context was cancelled while it waited for
// the lock: the client went away, so nobody reads the answer, but the
// access log tells it apart from a server failure.
const StatusClientClosedRequest = lockhttp.StatusClientClosedRequest

// jsonError writes {"error": msg} with status and returns nil. It writes
// the bytes itself (as httplock does) rather than return an error for
// Echo's HTTPErrorHandler — Echo's DefaultHTTPErrorHandler would write
// {"message": "..."}, an app's own handler anything — or call c.JSON,
// which goes through the app's JSONSerializer: the answer is the same as
// the other adapters' whatever the app is configured with.
func jsonError(c *echo.Context, status int, msg string) error {
	c.Response().Header().Set(echo.HeaderXContentTypeOptions, "nosniff")
	return c.Blob(status, lockhttp.ContentTypeJSON, lockhttp.ErrorBody(msg))
}

func defaultBusy(c *echo.Context, _ error) error {
	return jsonError(c, http.StatusTooManyRequests, lockhttp.MsgBusy)
}

func defaultError(c *echo.Context, status int, err error) error {
	return jsonError(c, status, lockhttp.Message(status, err))
}
