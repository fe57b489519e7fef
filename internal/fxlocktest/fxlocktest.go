// Package fxlocktest holds the fx adapters' test helper, apart from
// locktest so that the modules whose tests use locktest do not need fx.
package fxlocktest

import (
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/lockgate/lockgate/core"
)

// FxLocker provides a *core.Locker on client to an fx graph, shut down on
// stop: what the fx adapters' tests need from lockfx, without depending on
// it.
func FxLocker(client redis.UniversalClient, opts ...core.Option) fx.Option {
	return fx.Provide(func(lc fx.Lifecycle) (*core.Locker, error) {
		l, err := core.New(client, opts...)
		if err != nil {
			return nil, err
		}
		lc.Append(fx.StopHook(l.Shutdown))
		return l, nil
	})
}
