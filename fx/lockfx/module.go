package lockfx

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/lockgate/lockgate/core"
)

// OptionsGroup is the fx value group of the core options applied by New
// after Config: each value is the []core.Option of one Options call. Fill
// it with Options.
const OptionsGroup = "lockgate.options"

// Module provides *core.Locker, built by New from the redis.UniversalClient
// in the graph, an optional *Config and the core options of the
// OptionsGroup group. When the application stops, the Locker shuts down
// gracefully (core's Shutdown: the locks still held are released in Redis
// within fx's stop timeout); the client is not closed.
var Module = fx.Module("lockgate",
	fx.Provide(New),
)

// Options adds opts to the core options of the Locker built by Module
// (the OptionsGroup value group), for settings Config lacks such as
// core.WithReleaseTimeout, core.WithLogger or core.WithFenceWindow. They are applied
// after Config, in the order given within one call; the order between
// several Options calls is unspecified (fx does not order a value group),
// so give options that override each other in one call. A bad option
// (nil, or a value core rejects) fails the application's start.
func Options(opts ...core.Option) fx.Option {
	return fx.Supply(fx.Annotate(append([]core.Option(nil), opts...), fx.ResultTags(`group:"`+OptionsGroup+`"`)))
}

// Params are the inputs of New.
type Params struct {
	fx.In

	Lifecycle fx.Lifecycle
	// Client is the Redis client the Locker uses. Required (a nil client is
	// an error of New); never closed by this package.
	Client redis.UniversalClient
	// Config is optional; nil keeps every core default.
	Config *Config `optional:"true"`
	// Options are applied after Config: one []core.Option per Options
	// call.
	Options [][]core.Option `group:"lockgate.options"`
}

// New builds the Locker of Module with core.New and registers its Shutdown
// as an OnStop hook, so that a stopping application (a rolling deploy)
// cancels the contexts of the leases still held (cause core.ErrClosed) and
// releases their locks in Redis within fx's stop context instead of leaving
// them held for their TTL. It is exported for applications that prefer
// fx.Provide(lockfx.New) or fx.Decorate to the Module.
//
// core.New starts nothing: the Locker's background goroutines start with
// its first lease. So if the application fails to build after New (another
// constructor fails, and fx runs no OnStop hook), the Locker owns nothing
// that outlives it, unless a constructor already took a lock.
//
// Its OnStart hook checks the deployment (core's Locker.Ping): a node that
// does not answer, or a server older than Redis 7.0, fails the
// application's start (Config.StartWarnOnly only logs it).
//
// Errors: core.New's (matching core.ErrInvalid), for a nil client or an
// invalid option, prefixed with the Config field or Options entry at
// fault ("lockfx: Config.TTL: ..."). The OnStart hook returns Ping's
// error ("lockfx: start check: ..."). The OnStop hook returns Shutdown's
// error: releases Redis did not answer within the stop context (those
// locks expire after their TTL).
func New(p Params) (*core.Locker, error) {
	fields := p.Config.options()
	for _, group := range p.Options {
		for j, opt := range group {
			fields = append(fields, field{fmt.Sprintf("lockfx.Options option %d", j), opt})
		}
	}
	opts := make([]core.Option, len(fields))
	for i, f := range fields {
		opts[i] = f.opt
	}
	l, err := core.New(p.Client, opts...)
	if err != nil {
		return nil, fmt.Errorf("lockfx: %s%w", culprit(p.Client, fields), err)
	}
	warnOnly := p.Config != nil && p.Config.StartWarnOnly
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			err := l.Ping(ctx)
			switch {
			case err == nil:
				return nil
			case warnOnly:
				slog.Default().Warn("lockfx: start check failed; starting anyway (Config.StartWarnOnly)", slog.Any("error", err))
				return nil
			}
			return fmt.Errorf("lockfx: start check: %w", err)
		},
		OnStop: func(ctx context.Context) error {
			if err := l.Shutdown(ctx); err != nil {
				return fmt.Errorf("lockfx: shutdown: %w", err)
			}
			return nil
		},
	})
	return l, nil
}

// culprit names what made core.New fail ("Config.TTL: "), asking core
// about each option alone; "" when it cannot tell. It runs only after a
// failure. A Locker core.New builds here has started nothing and is closed
// at once.
func culprit(client redis.UniversalClient, fields []field) string {
	probe := func(opts ...core.Option) bool {
		l, err := core.New(client, opts...)
		if err != nil {
			return false
		}
		l.Close()
		return true
	}
	if !probe() {
		return "Client: "
	}
	for _, f := range fields {
		if !probe(f.opt) {
			return f.name + ": "
		}
	}
	return ""
}
