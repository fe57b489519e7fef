package fiberlock

import (
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/lockhttp"
	"github.com/lockgate/lockgate/keyfunc"
)

// Config defines the config for the middleware.
type Config struct {
	// Next defines a function to skip this middleware when it returns true.
	//
	// Optional. Default: nil
	Next func(c *fiber.Ctx) bool

	// Locker takes the locks.
	//
	// Required.
	Locker *core.Locker

	// Key is the key template, e.g. "order:{query.user_id}:{path.voucher}"
	// (see package keyfunc; {path.x} reads c.Params, percent-decoded unless
	// the app's UnescapePath did it, so /seckill/%37 locks voucher 7; a bare
	// {x} tries path, query, form, body, header in that order). It is
	// compiled once by New.
	//
	// Required unless Template is set.
	Key string

	// Template is a key template compiled beforehand or built with
	// keyfunc.Join; it wins over Key.
	//
	// Optional. Default: nil
	Template *keyfunc.Template

	// Wait is how long a request waits for a busy lock before LimitReached.
	// core.NoWait makes a single attempt; any other negative value is a
	// setup error (New panics).
	//
	// Optional. Default: 0, the Locker's wait (2s unless set in core.New)
	Wait time.Duration

	// TTL is the lease time of the lock, renewed by the watchdog while the
	// handler runs. A value other than 0 below core.MinTTL (50ms) is a
	// setup error.
	//
	// Optional. Default: 0, the Locker's TTL (30s unless set in core.New)
	TTL time.Duration

	// ReleaseTimeout bounds how long the release after the handler waits
	// for Redis (core.WithReleaseTimeout); a release not answered in time
	// is logged and the lock expires after its TTL. A negative value is a
	// setup error.
	//
	// Optional. Default: 0, the Locker's (1s unless set in core.New)
	ReleaseTimeout time.Duration

	// LockOptions are further options for core.Locker.Lock
	// (core.WithoutWatchdog, ...), applied after Wait, TTL and
	// ReleaseTimeout, with core's meaning (core.WithWait(0) is a single
	// attempt). A nil or invalid option is a setup error.
	//
	// Optional. Default: nil
	LockOptions []core.LockOption

	// LimitReached answers a request whose lock is still busy when the wait
	// ends. The Retry-After header (core.RetryAfterSeconds: when the lock
	// is likely free, in whole seconds, at least 1) is set before it runs.
	//
	// Optional. Default: 429 with {"error": "resource is busy, retry later"}
	LimitReached fiber.Handler

	// ErrorHandler answers a request that cannot be served: status 400,
	// 413, 499, 500 or 503 and err its cause, as middleware/README.md in
	// the repository lists them (Replacing the answers); only a 400's
	// *keyfunc.Error may be sent (it names the part, never the value), the
	// others are internal. The wait is bounded by the user context,
	// c.UserContext().
	//
	// Optional. Default: that status with {"error": "..."}: the key error's
	// text for 400, fixed texts otherwise
	ErrorHandler func(c *fiber.Ctx, status int, err error) error

	// FailOpen runs the handler without the lock, logging a warning, when
	// Redis is unavailable (the lock error matches core.ErrUnavailable) and
	// the user context is still live. Every other failure is answered as
	// without it: the Locker closed (core.ErrClosed), an unsupported server,
	// a context that ended, bad input.
	//
	// Optional. Default: false (fail closed: 503, handler not run)
	FailOpen bool

	// Route is the pattern of the route the middleware serves, as the
	// router writes it ("/v/:voucher"), so that a {path.name} placeholder
	// the route does not have (a typo, {path.vouchr}) is a setup error
	// (New panics, Validate returns it) matching keyfunc.ErrBadTemplate
	// naming the template and the route.
	//
	// Optional. Default: "" (such a placeholder is answered 500, see
	// middleware/README.md, Answers)
	Route string

	// Limit admits up to Limit requests of one key at once instead of one
	// at a time: each holds one of Limit permits of the semaphore named by
	// the key (core.Locker.Semaphore), across instances; Limit: 3 is at
	// most 3 exports per tenant at once with Key "export:{query.tenant}". A
	// request over the limit waits as for a busy lock (FIFO, Wait's
	// budget) and is then answered 429 with Retry-After; every other answer
	// is the lock's. Every route locking one key must set the same Limit (a
	// different one is answered 503 while the other holds or waits for
	// permits). The lease in the handler is a permit: a Lock of its key does
	// not re-enter it. A negative value is a setup error.
	//
	// Optional. Default: 0, the lock (one request of a key at a time)
	Limit int

	// Shared takes the key's lock shared with the other Shared requests of
	// the key (core.Locker.RLock, a read lock) instead of exclusively: GET
	// /vouchers/:id with Shared: true serves its readers of a voucher
	// together, while a route locking the same key without it (PUT
	// /vouchers/:id/restock, the writer) excludes them and is not overtaken
	// by readers that come after it. A request that cannot enter waits as
	// for a busy lock (FIFO, Wait's budget) and is then answered 429 with
	// Retry-After; every other answer is the lock's. The lease in the
	// handler is a read lock: a Lock of its key in the handler's context is
	// core.ErrInvalid (a read lock is not upgraded). A Redlock Locker has
	// no shared locks: every request is answered 503, logged. Shared with
	// a Limit is a setup error.
	//
	// Optional. Default: false, the lock taken exclusively
	Shared bool

	// Logger logs fail-open runs, lock failures and failed releases.
	//
	// Optional. Default: slog.Default()
	Logger *slog.Logger

	// MaxBodySize bounds the body, in bytes, when the key reads it ({body.*},
	// {form.*} or a bare name); a larger body is answered 413. The app's own
	// BodyLimit (default 4 MiB) applies before. A negative value is a setup
	// error.
	//
	// Optional. Default: keyfunc.DefaultMaxBodySize (1 MiB)
	MaxBodySize int

	// ContextValue reads {ctx.name}.
	//
	// Optional. Default: c.Locals(name) when it holds a string, integer or
	// fmt.Stringer, else keyfunc.ContextValue(c.UserContext(), name)
	ContextValue func(c *fiber.Ctx, name string) (string, bool)
}

// ConfigDefault is the default config. Locker and Key have no default.
var ConfigDefault = Config{
	Next:         nil,
	LimitReached: defaultLimitReached,
	ErrorHandler: defaultErrorHandler,
	MaxBodySize:  keyfunc.DefaultMaxBodySize,
	ContextValue: defaultContextValue,
}

func defaultContextValue(c *fiber.Ctx, name string) (string, bool) {
	return lockhttp.ContextValue(c.Locals(name), c.UserContext(), name)
}
