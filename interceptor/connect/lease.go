package connectlock

import (
	"context"

	"github.com/lockgate/lockgate/core"
)

// FromContext returns the lease under which the handler runs: ctx is the
// handler's context or derives from it. It returns nil for a procedure
// that is not locked, or locked fail-open while Redis was unavailable. Use
// the lease's Fence with every write the lock protects; a core.Lock of the
// same key with ctx re-enters the lock. It is core.FromContext, under the
// name every adapter uses (grpclock.FromContext, httplock.FromContext).
func FromContext(ctx context.Context) *core.Lease { return core.FromContext(ctx) }
