package ginlock

import (
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/lockhttp"
)

// Option configures the middleware built by New and NewTemplate. Every
// option is checked there: an invalid value makes New return an error
// (matching core.ErrInvalid and naming the option), never a failure of
// each request, and never a reason to fail open.
type Option func(*options)

// ErrorHandler writes the answer to a request that cannot be served; the
// chain is already aborted when it runs (c.IsAborted). status is 400, 413,
// 499, 500 or 503 and err its cause, as middleware/README.md in the
// repository lists them (Replacing the answers): only a 400's
// *keyfunc.Error may be sent (it names the part of the key, never the
// value); the others are internal.
type ErrorHandler func(c *gin.Context, status int, err error)

// options are the settings New and NewTemplate check: those every adapter
// has, and Gin's answers, skipper and readers.
type options = lockhttp.Options[*gin.Context, gin.HandlerFunc, ErrorHandler]

// with makes the options.
var with lockhttp.With[*gin.Context, gin.HandlerFunc, ErrorHandler]

func defaultOptions() options {
	return options{
		Busy:  defaultBusy,
		Error: defaultError,
		Setup: lockhttp.NewSetup("ginlock"),
		Path:  (*gin.Context).Param,
		Ctx:   defaultContextValue,
	}
}

// defaultContextValue reads {ctx.name} from the value earlier middleware
// stored with c.Set(name, v) when it is a string, an integer or a
// fmt.Stringer (keyfunc.FormatValue), else from c.Request.Context()
// (keyfunc.WithValue).
func defaultContextValue(c *gin.Context, name string) (string, bool) {
	v, _ := c.Get(name)
	return lockhttp.ContextValue(v, c.Request.Context(), name)
}

// WithWait sets how long a request waits for a busy lock before the busy
// answer (429). core.NoWait makes a single attempt; 0 sets nothing (the
// Locker's wait applies, 2s unless set with core.WithWait in core.New, or
// the one an earlier option set). Another negative value is an error of
// New.
func WithWait(d time.Duration) Option {
	return with.Wait(d)
}

// WithTTL sets the lease time of the lock (renewed by the watchdog while the
// handler runs). 0 sets nothing (the Locker's TTL applies, 30s unless set in
// core.New). Any other value below core.MinTTL (50ms) is an error of New.
func WithTTL(d time.Duration) Option {
	return with.TTL(d)
}

// WithReleaseTimeout bounds how long the release after the handler waits
// for Redis (core.WithReleaseTimeout): a release not answered in time is
// logged and the lock expires after its TTL; the response is not held
// longer. 0 sets nothing (the Locker's, 1s unless set in core.New); a
// negative value is an error of New.
func WithReleaseTimeout(d time.Duration) Option {
	return with.ReleaseTimeout(d)
}

// WithLockOptions passes further per-call options to core.Locker.Lock
// (core.WithoutWatchdog, core.WithReleaseTimeout, ...), applied in order
// with the other lock options. They keep core's meaning (core.WithWait(0)
// is a single attempt). Default none. A nil or invalid option is an error
// of New.
func WithLockOptions(opts ...core.LockOption) Option {
	return with.LockOptions(opts)
}

// WithBusyHandler replaces the answer to a request whose lock is still busy
// when the wait ends. The chain is already aborted and the Retry-After
// header (core.RetryAfterSeconds: when the lock is likely free, in whole
// seconds, at least 1) already set when h runs, so h only writes the
// answer. nil keeps the default: 429 with {"error": "..."}.
func WithBusyHandler(h gin.HandlerFunc) Option {
	return with.Busy(h, h != nil)
}

// WithErrorHandler replaces the 400, 413, 499, 500 and 503 answers (see
// ErrorHandler). nil keeps the default: that status with {"error": "..."}:
// the key error's text for 400 (it names the part, never the value), fixed
// texts otherwise — internal errors are never sent.
func WithErrorHandler(h ErrorHandler) Option {
	return with.Error(h, h != nil)
}

// WithSkip skips the middleware (no key, no lock; the chain goes on) for a
// request for which skip returns true, like the Skipper of other
// frameworks' middleware. nil keeps the default: nothing skipped.
func WithSkip(skip func(c *gin.Context) bool) Option {
	return with.Skip(skip)
}

// WithFailOpen makes the handler run without the lock, logging a warning,
// when Redis is unavailable (the lock error matches core.ErrUnavailable)
// and the request is still live. Every other failure is answered as
// without it: the Locker closed (core.ErrClosed), an unsupported server, a
// context that ended, bad input. Default: fail closed (503, handler not
// run).
func WithFailOpen() Option {
	return with.FailOpen()
}

// WithLogger sets the logger of fail-open runs, lock failures and failed
// releases. nil keeps the default, slog.Default() at construction.
func WithLogger(l *slog.Logger) Option {
	return with.Logger(l)
}

// WithMaxBodySize bounds the body read when the key uses {body.*}, {form.*}
// or a bare name; a longer body is answered 413. 0 sets nothing (default
// keyfunc.DefaultMaxBodySize, 1 MiB); a negative value is an error of New.
func WithMaxBodySize(n int64) Option {
	return with.MaxBodySize(n)
}

// WithLimit admits up to n requests of one key at once instead of one at a
// time: each holds one of n permits of the semaphore named by the key
// (core.Locker.Semaphore), across instances. At most 3 exports per tenant
// at once is New(l, "export:{query.tenant}", WithLimit(3)). A request over
// the limit waits as for a busy lock (FIFO, WithWait's budget) and is then
// answered 429 with Retry-After; every other answer is the lock's. Every
// route locking one key must pass the same n (a different one is answered
// 503 while the other holds or waits for permits). The lease in the
// handler is a permit: a Lock of its key does not re-enter it. Default:
// the lock; n below 1 is an error of New.
func WithLimit(n int) Option {
	return with.Limit(n)
}

// WithShared takes the key's lock shared with the other WithShared
// requests of the key (core.Locker.RLock, a read lock) instead of
// exclusively: GET /vouchers/{id} with WithShared() serves its readers of a
// voucher together, while a route locking the same key without it (PUT
// /vouchers/{id}/restock, the writer) excludes them and is not overtaken by
// readers that come after it. A request that cannot enter waits as for a
// busy lock (FIFO, WithWait's budget) and is then answered 429 with
// Retry-After; every other answer is the lock's. The lease in the handler
// is a read lock: a Lock of its key in the handler's context is
// core.ErrInvalid (a read lock is not upgraded). A Redlock Locker has no
// shared locks: every request is answered 503, logged. Default: the lock
// taken exclusively; with WithLimit an error of New.
func WithShared() Option {
	return with.Shared()
}

// WithRoute tells the middleware the pattern of the route it serves, as
// the router writes it ("/v/:voucher"), so that a {path.name} placeholder the
// route does not have (a typo, {path.vouchr}) is an error of New matching
// keyfunc.ErrBadTemplate naming the template and the route. Default "":
// such a placeholder is answered 500 (middleware/README.md, Answers).
func WithRoute(pattern string) Option {
	return with.Route(pattern)
}

// WithContextValue sets how {ctx.name} is read, for authentication
// middleware that store values their own way. nil keeps the default: the
// value stored with c.Set(name, v) when it is a string, an integer or a
// fmt.Stringer, else keyfunc.ContextValue(c.Request.Context(), name)
// (values stored with keyfunc.WithValue).
func WithContextValue(f func(c *gin.Context, name string) (string, bool)) Option {
	return with.Ctx(f)
}
