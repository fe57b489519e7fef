package core_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// holderIn is locktest.Holder with the fence as a number (0: none).
func holderIn(ctx context.Context, c redis.Cmdable, hash string) (string, int64) {
	owner, fence, _ := locktest.Holder(ctx, c, hash)
	f, _ := strconv.ParseInt(fence, 10, 64)
	return owner, f
}

// ownerIn is holderIn's owner.
func ownerIn(ctx context.Context, c redis.Cmdable, hash string) string {
	owner, _ := holderIn(ctx, c, hash)
	return owner
}

// within fails the test if ch does not close within d.
func within(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s did not happen within %v", what, d)
	}
}

// fixedAndControl runs f as two parallel subtests: "fixed", and "control",
// whose opts put mutant back (the defect the test guards against), so that
// the test shows its check can fail.
func fixedAndControl(t *testing.T, mutant string, f func(t *testing.T, control bool, opts []core.Option)) {
	for _, control := range []bool{false, true} {
		name, opts := "fixed", []core.Option(nil)
		if control {
			name, opts = "control", []core.Option{core.WithMutants(mutant)}
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, control, opts)
		})
	}
}

// onSingleAndCluster runs f in the subtests "single", on one server, and
// "cluster", on a 3-master Cluster, each with a client of its own.
func onSingleAndCluster(t *testing.T, f func(t *testing.T, c redis.UniversalClient)) {
	for _, cluster := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "cluster"}[cluster], func(t *testing.T) {
			var c redis.UniversalClient
			if cluster {
				c = redistest.StartCluster(t, 3).Client(t)
			} else {
				c = redistest.Start(t).Client(t)
			}
			f(t, c)
		})
	}
}
