package grpclock

import (
	"context"

	"github.com/lockgate/lockgate/core"
)

// FromContext returns the lease under which the handler runs: ctx is the
// handler's context (a unary handler's ctx, a stream's Context()) or
// derives from it. It returns nil for a method that is not locked, or
// locked fail-open while Redis was unavailable. Use the lease's Fence with
// every write the lock protects; a core.Lock of the same key with ctx
// re-enters the lock. It is core.FromContext, under the name every adapter
// uses (httplock.FromContext, fiberlock.FromContext).
func FromContext(ctx context.Context) *core.Lease { return core.FromContext(ctx) }
