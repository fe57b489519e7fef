package lockfx

import (
	"fmt"
	"strings"
	"time"

	"github.com/lockgate/lockgate/core"
)

// Config is the optional configuration of the Locker built by Module. Put a
// *Config in the graph (fx.Supply(&lockfx.Config{...})) to use it; every
// zero field keeps the core default. Options given with Options are applied
// after it and so win.
type Config struct {
	// Prefix of every Redis key and channel of the Locker.
	// Optional. Default core.DefaultPrefix ("lockgate:"). At most
	// core.MaxPrefixLen bytes, no '{' or '}'.
	Prefix string
	// TTL is the default lease time of every lock.
	// Optional. Default core.DefaultTTL (30s). At least core.MinTTL.
	TTL time.Duration
	// Wait is the default wait budget of Lock.
	// Optional. Default core.DefaultWait (2s). A negative value is an error;
	// a single attempt is chosen per call (core.WithWait(0) or TryLock), as 0
	// here means the default.
	Wait time.Duration
	// Observer is told of every lock event (metrics, logs).
	// Optional. Default none.
	Observer core.Observer
}

// options validates c and turns it into core options. Errors name the
// field and match core.ErrInvalid.
func (c *Config) options() ([]core.Option, error) {
	if c == nil {
		return nil, nil
	}
	var opts []core.Option
	if c.Prefix != "" {
		if len(c.Prefix) > core.MaxPrefixLen || strings.ContainsAny(c.Prefix, "{}") {
			return nil, fmt.Errorf("lockfx: Config.Prefix %q: %w: at most %d bytes, no braces", c.Prefix, core.ErrInvalid, core.MaxPrefixLen)
		}
		opts = append(opts, core.WithPrefix(c.Prefix))
	}
	if c.TTL != 0 {
		if c.TTL < core.MinTTL {
			return nil, fmt.Errorf("lockfx: Config.TTL %v: %w: below the minimum %v", c.TTL, core.ErrInvalid, core.MinTTL)
		}
		opts = append(opts, core.WithTTL(c.TTL))
	}
	if c.Wait < 0 {
		return nil, fmt.Errorf("lockfx: Config.Wait %v: %w: negative", c.Wait, core.ErrInvalid)
	}
	if c.Wait > 0 {
		opts = append(opts, core.WithWait(c.Wait))
	}
	if c.Observer != nil {
		opts = append(opts, core.WithObserver(c.Observer))
	}
	return opts, nil
}
