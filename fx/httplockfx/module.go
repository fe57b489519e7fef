package httplockfx

import (
	"fmt"
	"net/http"
	"slices"

	"go.uber.org/fx"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/fxgroup"
	httplock "github.com/lockgate/lockgate/middleware/nethttp"
)

// OptionsGroup is the value group of httplock.Option values applied to
// every middleware the Factory builds, before the route's own options.
// Fill it with Options.
const OptionsGroup = "lockgate.http.options"

// Module provides *Factory (built by NewFactory). A bad module-wide option
// makes NewFactory fail, and so the fx application's start.
var Module = fx.Module("lockgate.http",
	fx.Provide(NewFactory),
)

// Options adds opts to the defaults of every route's middleware (the
// OptionsGroup value group), for example httplock.WithLogger or
// httplock.WithWait. They are checked once, when the Factory is built. The
// order between several Options calls is unspecified.
func Options(opts ...httplock.Option) fx.Option {
	return fxgroup.Supply(OptionsGroup, opts)
}

// Params are the inputs of NewFactory.
type Params struct {
	fx.In

	// Locker is required (lockfx.Module provides one).
	Locker *core.Locker
	// Options apply to every route, before the route's own.
	Options []httplock.Option `group:"lockgate.http.options"`
}

// Factory builds httplock middleware on the graph's Locker with the
// module's default options. It is safe for concurrent use.
type Factory struct {
	locker *core.Locker
	opts   []httplock.Option
}

// probeKey is the template the module-wide options are checked with.
const probeKey = "lockgate-probe"

// NewFactory returns the Factory of Module, after checking the module-wide
// options as httplock.New does (so that a mistake fails the application's
// start rather than every route, or every request). It works without fx
// too: NewFactory(Params{Locker: l}).
//
// Errors: httplock.ErrNoLocker for a nil Locker; an error matching
// core.ErrInvalid and naming the option for a nil or invalid module-wide
// option (httplock.WithTTL below core.MinTTL, a negative wait other than
// core.NoWait, ...).
func NewFactory(p Params) (*Factory, error) {
	if p.Locker == nil {
		return nil, fmt.Errorf("httplockfx: %w", httplock.ErrNoLocker)
	}
	if _, err := httplock.New(p.Locker, probeKey, p.Options...); err != nil {
		return nil, fmt.Errorf("httplockfx: module options: %w", err)
	}
	return &Factory{locker: p.Locker, opts: slices.Clone(p.Options)}, nil
}

// New returns httplock.New(locker, key, defaults..., opts...): middleware
// running the next handler under the lock named by the key template.
// Errors: those of httplock.New (a malformed template, an invalid option of
// the route).
func (f *Factory) New(key string, opts ...httplock.Option) (func(http.Handler) http.Handler, error) {
	if f == nil || f.locker == nil {
		return nil, fmt.Errorf("httplockfx: Factory not built by NewFactory: %w", httplock.ErrNoLocker)
	}
	return httplock.New(f.locker, key, append(slices.Clone(f.opts), opts...)...)
}

// Must is New that panics on error, for one-line route setup with
// templates fixed in the program.
func (f *Factory) Must(key string, opts ...httplock.Option) func(http.Handler) http.Handler {
	return httplock.Must(f.New(key, opts...))
}
