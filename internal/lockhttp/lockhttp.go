// Package lockhttp is the middleware every HTTP adapter (httplock,
// fiberlock for Fiber v2 and v3, ginlock, echolock) runs: the Engine (skip,
// read the key, lock, answer a failure as Decide says, run the chain under
// the lease, release), set up from functional Options (httplock, ginlock)
// or a Config's Fields (fiberlock, echolock) checked by Setup; the default
// texts; and, for the adapters on net/http's *http.Request, reading the
// request for the key (Request: query, headers, the buffered body's JSON
// and form fields; 413 for a body over its bound). It holds no framework
// code: each adapter is a Shim that reads and writes its framework's
// request and response. middleware/README.md in the repository documents
// the answers, setup errors and defaults this makes the same for all.
package lockhttp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// StatusClientClosedRequest (499, "client closed request", as nginx logs
// it) answers a request whose context was cancelled while it waited for the
// lock: nobody reads the answer, but the access log tells it apart from a
// server failure.
const StatusClientClosedRequest = 499

// Texts of the default answers; internal errors are never sent.
const (
	MsgBusy        = "resource is busy, retry later"
	MsgUnavailable = "lock service unavailable"
	MsgDeadline    = "the request's deadline passed while waiting for the lock"
	MsgCanceled    = "client closed request"
	MsgTooLarge    = "request body too large"
	MsgBadRequest  = "bad request"
	MsgInternal    = "internal server error"
)

// ContentTypeJSON is the Content-Type of the default answers.
const ContentTypeJSON = "application/json; charset=utf-8"

// ErrorBody is the body of a default answer, {"error": msg} and a newline,
// for the adapters that write the bytes themselves (httplock, echolock).
func ErrorBody(msg string) []byte {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	return append(b, '\n')
}

// Decision is how to answer a failed Lock.
type Decision struct {
	// Status is the answer: 429 (busy: set Retry-After and run the busy
	// handler), 499, or 503 (run the error handler); 0 runs the handler
	// without the lock (fail-open).
	Status int
	// Level and Log say what to log (with the key and the error); Log is
	// empty when nothing is logged.
	Level slog.Level
	Log   string
}

// outcome is what a Lock error means for the answer.
type outcome int

const (
	failed      outcome = iota // anything else: 503, logged at error
	busy                       // core.ErrNotObtained: 429
	unavailable                // core.ErrUnavailable: 503 or fail-open
	deadline                   // a plain context.DeadlineExceeded: 503
	canceled                   // a plain context.Canceled: 499
)

// classify maps a Lock error to its outcome. A context error counts as the
// client's doing only when no lockgate reason comes with it (a cause such
// as core.ErrLockLost or core.ErrClosed is a failure).
func classify(err error) outcome {
	switch {
	case errors.Is(err, core.ErrNotObtained):
		return busy
	case errors.Is(err, core.ErrUnavailable):
		return unavailable
	case errors.Is(err, core.ErrClosed), errors.Is(err, core.ErrLockLost),
		errors.Is(err, core.ErrUnsupported), errors.Is(err, core.ErrInvalid):
		return failed
	case errors.Is(err, context.DeadlineExceeded):
		return deadline
	case errors.Is(err, context.Canceled):
		return canceled
	}
	return failed
}

// Decide maps a Lock error to its answer. failOpen is the route's setting:
// it applies only when Redis is unavailable (core.ErrUnavailable) and the
// request (ctx) is still live, never to a closed Locker, an unsupported
// server, bad input or a request that is over.
func Decide(err error, failOpen bool, ctx context.Context) Decision {
	switch classify(err) {
	case busy:
		return Decision{Status: http.StatusTooManyRequests}
	case unavailable:
		if failOpen && ctx.Err() == nil {
			return Decision{Level: slog.LevelWarn, Log: "lockgate: redis unavailable; running the handler without the lock (fail-open)"}
		}
		return Decision{Status: http.StatusServiceUnavailable, Level: slog.LevelError, Log: "lockgate: redis unavailable; answering 503"}
	case deadline:
		return Decision{Status: http.StatusServiceUnavailable, Level: slog.LevelWarn, Log: "lockgate: the request's deadline passed while waiting for the lock; answering 503"}
	case canceled:
		return Decision{Status: StatusClientClosedRequest, Level: slog.LevelInfo, Log: "lockgate: request cancelled while waiting for the lock; answering 499"}
	}
	return Decision{Status: http.StatusServiceUnavailable, Level: slog.LevelError, Log: "lockgate: lock failed; answering 503"}
}

// Message is the default text of an error answer with status for err: the
// key error's own text for 400 (it names the part, never the value), fixed
// texts otherwise.
func Message(status int, err error) string {
	switch status {
	case http.StatusTooManyRequests:
		return MsgBusy
	case http.StatusRequestEntityTooLarge:
		return MsgTooLarge
	case http.StatusBadRequest:
		var ke *keyfunc.Error
		if errors.As(err, &ke) {
			return ke.Error()
		}
		return MsgBadRequest
	case StatusClientClosedRequest:
		return MsgCanceled
	case http.StatusInternalServerError:
		return MsgInternal
	case http.StatusServiceUnavailable:
		if classify(err) == deadline {
			return MsgDeadline
		}
	}
	return MsgUnavailable
}

// Report logs the decision (when it has a line to log) with the route's
// pattern and the error, never the key.
func (d Decision) Report(ctx context.Context, logger *slog.Logger, pattern string, err error) {
	if d.Log != "" {
		logger.Log(ctx, d.Level, d.Log, slog.String("pattern", pattern), slog.Any("error", err))
	}
}

// Release unlocks lease after the handler (detached from ctx's
// cancellation and bounded by the release timeout, as Lease.Unlock is) and
// logs a failure with the lease's pattern and fence.
func Release(ctx context.Context, logger *slog.Logger, lease *core.Lease) {
	if err := lease.Unlock(ctx); err != nil {
		logger.WarnContext(ctx, "lockgate: release failed (the lock expires after its TTL)",
			slog.String("pattern", lease.Pattern()), slog.Int64("fence", lease.Fence()), slog.Any("error", err))
	}
}
