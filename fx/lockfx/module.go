package lockfx

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/fxgroup"
)

// OptionsGroup is the fx value group of core.Option values applied by New
// after Config. Fill it with Options.
const OptionsGroup = "lockgate.options"

// Module provides *core.Locker, built by New from the redis.UniversalClient
// in the graph, an optional *Config and the core.Option values of the
// OptionsGroup group. The Locker is closed when the application stops; the
// client is not.
var Module = fx.Module("lockgate",
	fx.Provide(New),
)

// Options adds opts to the core options of the Locker built by Module
// (the OptionsGroup value group), for settings Config lacks such as
// core.WithRetry or core.WithFenceWindow. They are applied after Config, in
// the order given; the order between several Options calls is unspecified.
func Options(opts ...core.Option) fx.Option {
	return fxgroup.Supply(OptionsGroup, opts)
}

// Params are the inputs of New.
type Params struct {
	fx.In

	Lifecycle fx.Lifecycle
	// Client is the Redis client the Locker uses. Required; never closed by
	// this package.
	Client redis.UniversalClient
	// Config is optional; nil keeps every core default.
	Config *Config `optional:"true"`
	// Options are applied after Config.
	Options []core.Option `group:"lockgate.options"`
}

// New builds the Locker of Module and registers its Close as an OnStop
// hook. It is exported for applications that prefer fx.Provide(lockfx.New)
// or fx.Decorate to the Module. Errors: a Config field out of range (the
// error names it and matches core.ErrInvalid), or a nil Client. Options
// invalid for core are reported, as core.New documents, by every Lock.
//
// core.New starts the Locker's background goroutines at once; if the
// application then fails to build (another constructor fails), fx runs no
// OnStop hook and they stay until the process exits, as it normally does
// after such a failure.
func New(p Params) (*core.Locker, error) {
	if p.Client == nil {
		return nil, errors.New("lockfx: no redis.UniversalClient in the graph")
	}
	opts, err := p.Config.options()
	if err != nil {
		return nil, err
	}
	opts = append(opts, p.Options...)
	l := core.New(p.Client, opts...)
	p.Lifecycle.Append(fx.Hook{
		OnStop: func(context.Context) error { return l.Close() },
	})
	return l, nil
}
