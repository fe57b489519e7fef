package lockfx

import (
	"time"

	"github.com/lockgate/lockgate/core"
)

// Config is the optional configuration of the Locker built by Module. Put a
// *Config in the graph (fx.Supply(&lockfx.Config{...})) to use it. Each
// field maps to one core option, which core.New checks (a bad value fails
// the application's start with core's error, naming the field); a zero
// field keeps the core default. Options given with Options are applied
// after it and so win.
type Config struct {
	// Prefix of every Redis key and channel of the Locker (core.WithPrefix).
	// Optional. Default core.DefaultPrefix ("lockgate:"). At most
	// core.MaxPrefixLen bytes, no '{' or '}'.
	Prefix string
	// TTL is the default lease time of every lock (core.WithTTL).
	// Optional. Default core.DefaultTTL (30s). At least core.MinTTL.
	TTL time.Duration
	// Wait is the default wait budget of Lock (core.WithWait). Optional.
	// 0 keeps core.DefaultWait (2s); core.NoWait makes every Lock a single
	// attempt; another negative value is an error.
	Wait time.Duration
	// ReleaseTimeout bounds how long Unlock waits for Redis
	// (core.WithReleaseTimeout). Optional. 0 keeps
	// core.DefaultReleaseTimeout (1s); a negative value is an error.
	ReleaseTimeout time.Duration
	// Observer is told of every lock event (core.WithObserver).
	// Optional. Default none.
	Observer core.Observer
	// StartWarnOnly makes the start check only warn. Optional. Default
	// false: the application's start runs core's Locker.Ping (every node
	// the Locker uses answers, each server is Redis 7.0 or later) and fails
	// if it does not pass, naming the nodes and the causes. With true a
	// failed check is logged (slog's default logger) and the application
	// starts; its locks then fail with ErrUnavailable until Redis answers.
	StartWarnOnly bool
}

// field is a core option with the Config field (or Options entry) it
// comes from, to name it in errors.
type field struct {
	name string
	opt  core.Option
}

// options turns c into core options, each labelled with its field. Nothing
// is checked here: core.New does it.
func (c *Config) options() []field {
	if c == nil {
		return nil
	}
	var fs []field
	if c.Prefix != "" {
		fs = append(fs, field{"Config.Prefix", core.WithPrefix(c.Prefix)})
	}
	if c.TTL != 0 {
		fs = append(fs, field{"Config.TTL", core.WithTTL(c.TTL)})
	}
	if c.Wait != 0 {
		fs = append(fs, field{"Config.Wait", core.WithWait(c.Wait)})
	}
	if c.ReleaseTimeout != 0 {
		fs = append(fs, field{"Config.ReleaseTimeout", core.WithReleaseTimeout(c.ReleaseTimeout)})
	}
	if c.Observer != nil {
		fs = append(fs, field{"Config.Observer", core.WithObserver(c.Observer)})
	}
	return fs
}
