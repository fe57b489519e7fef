package httplockfx

import (
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

// Module provides *Factory (built by NewFactory).
var Module = fx.Module("lockgate.http",
	fx.Provide(NewFactory),
)

// Options adds opts to the defaults of every route's middleware (the
// OptionsGroup value group), for example httplock.WithLogger or
// httplock.WithWait. The order between several Options calls is
// unspecified.
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

// NewFactory returns the Factory of Module. It works without fx too:
// NewFactory(Params{Locker: l}).
func NewFactory(p Params) *Factory {
	return &Factory{locker: p.Locker, opts: slices.Clone(p.Options)}
}

// New returns httplock.New(locker, key, defaults..., opts...): middleware
// running the next handler under the lock named by the key template.
// Errors: those of httplock.New (a malformed template, a nil Locker).
func (f *Factory) New(key string, opts ...httplock.Option) (func(http.Handler) http.Handler, error) {
	return httplock.New(f.locker, key, append(slices.Clone(f.opts), opts...)...)
}

// Must is New that panics on error, for one-line route setup with
// templates fixed in the program.
func (f *Factory) Must(key string, opts ...httplock.Option) func(http.Handler) http.Handler {
	return httplock.Must(f.New(key, opts...))
}
