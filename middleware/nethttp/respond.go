package httplock

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/lockhttp"
)

// StatusClientClosedRequest (499, "client closed request", as nginx logs
// it) answers a request whose context was cancelled while it waited for
// the lock: the client went away, so nobody reads the answer, but the
// access log tells it apart from a server failure.
const StatusClientClosedRequest = lockhttp.StatusClientClosedRequest

// writeJSONError writes {"error": msg} with status.
func writeJSONError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func defaultBusy(w http.ResponseWriter, _ *http.Request) {
	writeJSONError(w, http.StatusTooManyRequests, lockhttp.MsgBusy)
}

func defaultError(w http.ResponseWriter, _ *http.Request, status int, err error) {
	writeJSONError(w, status, lockhttp.Message(status, err))
}

func setRetryAfter(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", strconv.Itoa(core.RetryAfterSeconds(err)))
}
