package httplock

import (
	"net/http"

	"github.com/lockgate/lockgate/internal/lockhttp"
)

// StatusClientClosedRequest (499, "client closed request", as nginx logs
// it) answers a request whose context was cancelled while it waited for
// the lock: the client went away, so nobody reads the answer, but the
// access log tells it apart from a server failure.
const StatusClientClosedRequest = lockhttp.StatusClientClosedRequest

// writeJSONError writes {"error": msg} with status.
func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", lockhttp.ContentTypeJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(lockhttp.ErrorBody(msg))
}

func defaultBusy(w http.ResponseWriter, _ *http.Request) {
	writeJSONError(w, http.StatusTooManyRequests, lockhttp.MsgBusy)
}

func defaultError(w http.ResponseWriter, _ *http.Request, status int, err error) {
	writeJSONError(w, status, lockhttp.Message(status, err))
}
