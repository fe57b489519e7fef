package echolock

import (
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/lockhttp"
	"github.com/lockgate/lockgate/keyfunc"
)

// Config defines the config for the middleware. Every field is checked by
// NewWithConfig: an invalid value is an error there, naming the field,
// never a failure of each request, and never a reason to fail open.
type Config struct {
	// Skipper defines a function to skip the middleware: the handler runs
	// without the lock (FromContext returns nil), nothing is read or taken.
	//
	// Optional. Default: middleware.DefaultSkipper (never skips)
	Skipper middleware.Skipper

	// Locker takes the locks.
	//
	// Required.
	Locker *core.Locker

	// Key is the key template, e.g. "order:{query.user_id}:{path.voucher}"
	// (see package keyfunc; {path.x} reads the route parameter c.Param("x")
	// of ":x", percent-decoded; a bare {x} tries path, query, form, body,
	// header in that order). It is compiled once, by NewWithConfig.
	//
	// Required unless Template is set.
	Key string

	// Template is a key template compiled beforehand or built with
	// keyfunc.Join; it wins over Key. It is re-validated for HTTP
	// (keyfunc.HTTP): gRPC sources are a setup error.
	//
	// Optional. Default: nil
	Template *keyfunc.Template

	// Wait is how long a request waits for a busy lock before BusyHandler.
	// core.NoWait makes a single attempt; any other negative value is a
	// setup error.
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

	// MaxBodySize bounds the body, in bytes, read when the key uses it
	// ({body.*}, {form.*} or a bare name); a larger body is answered 413.
	// The body is read once and replayed to the handler. A negative value
	// is a setup error.
	//
	// Optional. Default: 0, keyfunc.DefaultMaxBodySize (1 MiB)
	MaxBodySize int64

	// FailOpen runs the handler without the lock, logging a warning, when
	// Redis is unavailable (the lock error matches core.ErrUnavailable) and
	// the request is still live. Every other failure is answered as without
	// it: the Locker closed (core.ErrClosed), an unsupported server, a
	// request that is over, bad input.
	//
	// Optional. Default: false (fail closed: 503, handler not run)
	FailOpen bool

	// Route is the pattern of the route the middleware serves, as the
	// router writes it ("/v/:voucher"), so that a {path.name} placeholder
	// the route does not have (a typo, {path.vouchr}) is an error of
	// NewWithConfig matching keyfunc.ErrBadTemplate naming the template
	// and the route.
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
	// Optional. Default: slog.Default() at construction
	Logger *slog.Logger

	// BusyHandler answers a request whose lock is still busy when the wait
	// ends; err matches core.ErrNotObtained (core.RetryAfter(err) tells when
	// the lock is likely free). The Retry-After header
	// (core.RetryAfterSeconds, whole seconds, at least 1) is already set when
	// it runs. What it returns is returned by the middleware: nil after
	// writing the answer, or an error (an *echo.HTTPError) for Echo's
	// HTTPErrorHandler to write.
	//
	// Optional. Default: 429 with {"error": "resource is busy, retry later"},
	// written by the middleware (see the package doc on errors)
	BusyHandler func(c echo.Context, err error) error

	// ErrorHandler answers a request that cannot be served: status 400,
	// 413, 499, 500 or 503 and err its cause, as middleware/README.md in
	// the repository lists them (Replacing the answers); only a 400's
	// *keyfunc.Error may be sent (it names the part, never the value), the
	// others are internal. A 413's err is Echo's own when its BodyLimit
	// middleware in front cut the body off.
	// What it returns is returned by the middleware, as for BusyHandler; to
	// have the app's HTTPErrorHandler write every answer:
	//
	//	ErrorHandler: func(c echo.Context, status int, err error) error {
	//		return echo.NewHTTPError(status).SetInternal(err)
	//	}
	//
	// Optional. Default: that status with {"error": "..."}: the key error's
	// text for 400, fixed texts otherwise, written by the middleware
	ErrorHandler func(c echo.Context, status int, err error) error

	// ContextValue reads {ctx.name}, for authentication middleware that
	// publish the caller's identity.
	//
	// Optional. Default: c.Get(name) when it holds a string, integer,
	// boolean or fmt.Stringer (keyfunc.FormatValue), else
	// keyfunc.ContextValue(c.Request().Context(), name)
	ContextValue func(c echo.Context, name string) (string, bool)
}

// DefaultConfig is the default config. Locker and Key have no default.
var DefaultConfig = Config{
	Skipper:      middleware.DefaultSkipper,
	MaxBodySize:  keyfunc.DefaultMaxBodySize,
	BusyHandler:  defaultBusy,
	ErrorHandler: defaultError,
	ContextValue: defaultContextValue,
}

// withDefaults returns cfg with its zero fields set to the defaults (the
// Logger is lockhttp.ConfigEngine's, slog.Default()).
func withDefaults(cfg Config) Config {
	if cfg.Skipper == nil {
		cfg.Skipper = DefaultConfig.Skipper
	}
	if cfg.MaxBodySize == 0 {
		cfg.MaxBodySize = DefaultConfig.MaxBodySize
	}
	if cfg.BusyHandler == nil {
		cfg.BusyHandler = DefaultConfig.BusyHandler
	}
	if cfg.ErrorHandler == nil {
		cfg.ErrorHandler = DefaultConfig.ErrorHandler
	}
	if cfg.ContextValue == nil {
		cfg.ContextValue = DefaultConfig.ContextValue
	}
	return cfg
}

func defaultContextValue(c echo.Context, name string) (string, bool) {
	return lockhttp.ContextValue(c.Get(name), c.Request().Context(), name)
}
