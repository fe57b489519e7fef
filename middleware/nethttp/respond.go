package httplock

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// Texts of the default answers; internal errors are never sent.
const (
	msgBusy        = "resource is busy, retry later"
	msgUnavailable = "lock service unavailable"
	msgTooLarge    = "request body too large"
	msgBadBody     = "request body could not be read"
)

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
	writeJSONError(w, http.StatusTooManyRequests, msgBusy)
}

func defaultError(w http.ResponseWriter, _ *http.Request, status int, err error) {
	msg := msgUnavailable
	switch status {
	case http.StatusRequestEntityTooLarge:
		msg = msgTooLarge
	case http.StatusBadRequest:
		msg = msgBadBody
		var ke *keyfunc.Error
		if errors.As(err, &ke) {
			msg = ke.Error()
		}
	}
	writeJSONError(w, status, msg)
}

func setRetryAfter(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", strconv.Itoa(core.RetryAfterSeconds(err)))
}
