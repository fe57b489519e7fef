package rig

import (
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/lockgate/lockgate/core"
)

// RedlockMaxTTL caps the mixed lease times on Redlock: a master restarted
// empty must stay down for the longest lease first (redis.io's delayed
// restart), and a minute down would leave the rig few restarts.
const RedlockMaxTTL = 2 * time.Second

// longestLease is the longest lease time a run's workers ask for.
func longestLease(c *RunConfig) time.Duration {
	switch {
	case c.TTL > 0:
		return c.TTL
	case len(c.TTLs) > 0:
		return slices.Max(c.TTLs)
	case c.Topology == "redlock":
		return RedlockMaxTTL
	}
	return time.Minute
}

// ParseDurations reads a comma-separated list of durations ("" is none).
func ParseDurations(list string) ([]time.Duration, error) {
	var out []time.Duration
	for _, t := range strings.Split(list, ",") {
		if t == "" {
			continue
		}
		d, err := time.ParseDuration(t)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// pick draws from choices, each with its weight in percent (they sum to 100).
func pick[T any](rng *rand.Rand, choices []T, weights []int) T {
	r := rng.IntN(100)
	for i, wt := range weights {
		if r < wt {
			return choices[i]
		}
		r -= wt
	}
	return choices[len(choices)-1]
}

// The mixes of a run without a fixed TTL or wait: mostly short leases and
// budgets, a few long ones; the longest leases only on the cold keys (a
// killed holder keeps its lock for its TTL).
var (
	hotTTLs    = []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second, 10 * time.Second}
	hotTTLWt   = []int{5, 15, 45, 30, 5}
	coldTTLs   = []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second, 10 * time.Second, time.Minute}
	coldTTLWt  = []int{5, 15, 40, 25, 10, 5}
	waits      = []time.Duration{core.NoWait, 50 * time.Millisecond, 300 * time.Millisecond, time.Second, 3 * time.Second, 10 * time.Second}
	waitWt     = []int{10, 10, 20, 35, 15, 10}
	crowdWaits = []time.Duration{time.Second, 3 * time.Second, 10 * time.Second}
	crowdWt    = []int{30, 40, 30}
)
