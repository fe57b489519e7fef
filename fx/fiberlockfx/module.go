package fiberlockfx

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/fx"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/fxgroup"
	fiberlock "github.com/lockgate/lockgate/middleware/fiber"
)

// OptionsGroup is the value group of *Defaults merged into the defaults of
// every middleware the Factory builds, with the *Defaults in the graph if
// there is one. Fill it with Options.
const OptionsGroup = "lockgate.fiber.options"

// Module provides *Factory (built by NewFactory). Bad Defaults make
// NewFactory fail, and so the fx application's start.
var Module = fx.Module("lockgate.fiber",
	fx.Provide(NewFactory),
)

// Options adds defaults to those of every route's middleware (the
// OptionsGroup value group), for example Defaults{Logger: log} from one
// module and Defaults{Wait: time.Second} from another. fx does not order a
// value group, so the pieces are merged by field, not in turn: a field may
// be set (non-zero) by one piece only, else NewFactory fails naming it;
// FailOpen is on when any piece turns it on. They are checked once, when
// the Factory is built, as the *Defaults in the graph is.
func Options(defaults ...Defaults) fx.Option {
	ds := make([]*Defaults, len(defaults))
	for i, d := range defaults {
		ds[i] = &d
	}
	return fxgroup.Supply(OptionsGroup, ds)
}

// Defaults is the optional default configuration of every route's
// middleware: put a *Defaults in the graph (fx.Supply). It carries exactly
// the fiberlock.Config fields that make sense for every route — not Locker
// (the graph's), Key, Template, Limit or Shared (the route's) — with the
// same meaning and checks; a test holds the two structs in step. Each zero
// field of a route's Config takes the value here, except FailOpen (true
// when either says so) and LockOptions (these first, then the route's).
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
	// Options are merged with Defaults, field by field (see Options).
	Options []*Defaults `group:"lockgate.fiber.options"`
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
// invalid LockOptions entry; a field set by more than one of Defaults and
// the Options pieces.
func NewFactory(p Params) (*Factory, error) {
	if p.Locker == nil {
		return nil, fmt.Errorf("fiberlockfx: Params.Locker is required: %w", core.ErrInvalid)
	}
	def, err := merge(append([]*Defaults{p.Defaults}, p.Options...))
	if err != nil {
		return nil, err
	}
	f := &Factory{locker: p.Locker, def: def}
	if err := fiberlock.Validate(f.config(fiberlock.Config{Key: probeKey})); err != nil {
		return nil, fmt.Errorf("fiberlockfx: Defaults: %w", err)
	}
	return f, nil
}

// merge is the Defaults ds set together (nil entries skipped), each field
// taken from the one piece that sets it; FailOpen is on when any turns it on.
// A field set by two pieces is an error: fx gives the group in no order, so
// neither may win.
func merge(ds []*Defaults) (Defaults, error) {
	var out Defaults
	ov := reflect.ValueOf(&out).Elem()
	for _, d := range ds {
		if d == nil {
			continue
		}
		dv := reflect.ValueOf(d).Elem()
		for i := range dv.NumField() {
			v, dst := dv.Field(i), ov.Field(i)
			if unset(v) {
				continue
			}
			name := dv.Type().Field(i).Name
			if name == "FailOpen" {
				dst.SetBool(true)
				continue
			}
			if !unset(dst) {
				return Defaults{}, fmt.Errorf("fiberlockfx: Defaults.%s is set by more than one of Defaults and Options: %w", name, core.ErrInvalid)
			}
			dst.Set(v)
		}
	}
	out.LockOptions = slices.Clone(out.LockOptions)
	return out, nil
}

// unset reports whether a Defaults field leaves the route's value alone: its
// zero value, or an empty LockOptions.
func unset(v reflect.Value) bool {
	if v.Kind() == reflect.Slice {
		return v.Len() == 0
	}
	return v.IsZero()
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
