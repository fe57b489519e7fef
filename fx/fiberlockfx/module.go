package fiberlockfx

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/fx"

	"github.com/lockgate/lockgate/core"
	fiberlock "github.com/lockgate/lockgate/middleware/fiber"
)

// Module provides *Factory (built by NewFactory). Bad Defaults make
// NewFactory fail, and so the fx application's start.
var Module = fx.Module("lockgate.fiber",
	fx.Provide(NewFactory),
)

// Defaults is the optional default configuration of every route's
// middleware: put a *Defaults in the graph (fx.Supply). It carries exactly
// the fiberlock.Config fields that make sense for every route — not
// Locker (the graph's), Key or Template (the route's) — with the same
// meaning and checks; a test holds the two structs in step. Each zero field
// of a route's Config takes the value here, except FailOpen (true when
// either says so) and LockOptions (these first, then the route's).
type Defaults struct {
	// Next skips the middleware when it returns true (fiberlock.Config.Next).
	Next func(c *fiber.Ctx) bool
	// Wait: 0 the Locker's, core.NoWait a single attempt; another negative
	// value is an error of NewFactory.
	Wait time.Duration
	// TTL: 0 the Locker's; otherwise at least core.MinTTL.
	TTL time.Duration
	// ReleaseTimeout: 0 the Locker's (1s); negative is an error.
	ReleaseTimeout time.Duration
	// LockOptions come before each route's own; nil or invalid entries are
	// an error of NewFactory.
	LockOptions []core.LockOption
	// LimitReached answers a busy request (fiberlock.Config.LimitReached).
	LimitReached fiber.Handler
	// ErrorHandler answers the 400, 413, 499 and 503 outcomes
	// (fiberlock.Config.ErrorHandler).
	ErrorHandler func(c *fiber.Ctx, status int, err error) error
	// FailOpen runs the handler without the lock when Redis is unavailable
	// (fiberlock.Config.FailOpen); a route cannot turn it off.
	FailOpen bool
	// Logger logs fail-open runs, lock failures and failed releases.
	Logger *slog.Logger
	// MaxBodySize bounds a body the key reads: 0 the default (1 MiB),
	// negative an error.
	MaxBodySize int
	// ContextValue reads {ctx.name} (fiberlock.Config.ContextValue).
	ContextValue func(c *fiber.Ctx, name string) (string, bool)
}

// Params are the inputs of NewFactory.
type Params struct {
	fx.In

	// Locker is required (lockfx.Module provides one).
	Locker *core.Locker
	// Defaults is optional.
	Defaults *Defaults `optional:"true"`
}

// Factory builds fiberlock middleware on the graph's Locker with the
// module's defaults. It is safe for concurrent use.
type Factory struct {
	locker *core.Locker
	def    Defaults
}

// probeKey is the template the Defaults are checked with.
const probeKey = "lockgate-probe"

// NewFactory returns the Factory of Module, after checking the Defaults as
// fiberlock.New checks a Config (fiberlock.Validate), so that a mistake
// fails the application's start rather than every route, or every
// request. It works without fx too: NewFactory(Params{Locker: l}).
//
// Errors, matching core.ErrInvalid and naming the field: a nil Locker;
// Defaults with a TTL below core.MinTTL, a negative Wait other than
// core.NoWait, a negative ReleaseTimeout or MaxBodySize, or a nil or
// invalid LockOptions entry.
func NewFactory(p Params) (*Factory, error) {
	if p.Locker == nil {
		return nil, fmt.Errorf("fiberlockfx: Params.Locker is required: %w", core.ErrInvalid)
	}
	f := &Factory{locker: p.Locker}
	if p.Defaults != nil {
		f.def = *p.Defaults
		f.def.LockOptions = slices.Clone(p.Defaults.LockOptions)
	}
	if err := fiberlock.Validate(f.config(fiberlock.Config{Key: probeKey})); err != nil {
		return nil, fmt.Errorf("fiberlockfx: Defaults: %w", err)
	}
	return f, nil
}

// config is cfg with the Factory's Locker when cfg.Locker is nil and the
// Defaults filled into its zero fields.
func (f *Factory) config(cfg fiberlock.Config) fiberlock.Config {
	d := &f.def
	if cfg.Locker == nil {
		cfg.Locker = f.locker
	}
	if cfg.Next == nil {
		cfg.Next = d.Next
	}
	if cfg.Wait == 0 {
		cfg.Wait = d.Wait
	}
	if cfg.TTL == 0 {
		cfg.TTL = d.TTL
	}
	if cfg.ReleaseTimeout == 0 {
		cfg.ReleaseTimeout = d.ReleaseTimeout
	}
	if len(d.LockOptions) > 0 {
		cfg.LockOptions = append(slices.Clone(d.LockOptions), cfg.LockOptions...)
	}
	if cfg.LimitReached == nil {
		cfg.LimitReached = d.LimitReached
	}
	if cfg.ErrorHandler == nil {
		cfg.ErrorHandler = d.ErrorHandler
	}
	cfg.FailOpen = cfg.FailOpen || d.FailOpen
	if cfg.Logger == nil {
		cfg.Logger = d.Logger
	}
	if cfg.MaxBodySize == 0 {
		cfg.MaxBodySize = d.MaxBodySize
	}
	if cfg.ContextValue == nil {
		cfg.ContextValue = d.ContextValue
	}
	return cfg
}

// New returns fiberlock.New(cfg) with the Factory's Locker when cfg.Locker
// is nil and the Defaults filled into cfg's zero fields. Like
// fiberlock.New it panics on a bad config, at route setup (no Key nor
// Template, a malformed template, an invalid field of the route; a Factory
// not built by NewFactory has no Locker).
func (f *Factory) New(cfg fiberlock.Config) fiber.Handler {
	return fiberlock.New(f.config(cfg))
}

// Key is New(fiberlock.Config{Key: key}): the one-line form.
func (f *Factory) Key(key string) fiber.Handler {
	return f.New(fiberlock.Config{Key: key})
}
