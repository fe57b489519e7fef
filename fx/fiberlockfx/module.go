package fiberlockfx

import (
	"slices"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/fx"

	"github.com/lockgate/lockgate/core"
	fiberlock "github.com/lockgate/lockgate/middleware/fiber"
)

// Module provides *Factory (built by NewFactory).
var Module = fx.Module("lockgate.fiber",
	fx.Provide(NewFactory),
)

// Defaults is the optional default configuration of every route's
// middleware: put a *Defaults in the graph (fx.Supply). Its fields are
// fiberlock.Config's; each zero field of a route's Config takes the value
// here (Locker and Key/Template are ignored: the Locker is the graph's, the
// key is the route's; FailOpen is true when either says so; LockOptions add
// up, these first).
type Defaults fiberlock.Config

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

// NewFactory returns the Factory of Module. It works without fx too:
// NewFactory(Params{Locker: l}).
func NewFactory(p Params) *Factory {
	f := &Factory{locker: p.Locker}
	if p.Defaults != nil {
		f.def = *p.Defaults
	}
	return f
}

// New returns fiberlock.New(cfg) with the Factory's Locker when cfg.Locker
// is nil and the Defaults filled into cfg's zero fields. Like
// fiberlock.New it panics on a bad config, at route setup (no Key nor
// Template, a malformed template, no Locker).
func (f *Factory) New(cfg fiberlock.Config) fiber.Handler {
	d := f.def
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
	return fiberlock.New(cfg)
}

// Key is New(fiberlock.Config{Key: key}): the one-line form.
func (f *Factory) Key(key string) fiber.Handler {
	return f.New(fiberlock.Config{Key: key})
}
