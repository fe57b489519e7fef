package fiberkey

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/lockhttp"
	"github.com/lockgate/lockgate/keyfunc"
)

// Handle is a ctx as the middleware runs on it: Ctx, and the rest of the
// chain and the response headers. Fiber v2's *fiber.Ctx and v3's
// fiber.Ctx both have it.
type Handle interface {
	Ctx
	Next() error
	Set(key, val string)
}

// Config is fiberlock's Config, the same for Fiber v2 and v3 but for the
// ctx C: each adapter converts its own Config to it, which Go allows
// because the fields are the same, of the same types, in the same order
// (a field changed in one of them fails that conversion at compile time).
// The fields' docs are the adapters'.
type Config[C Handle] struct {
	Next           func(c C) bool
	Locker         *core.Locker
	Key            string
	Template       *keyfunc.Template
	Wait           time.Duration
	TTL            time.Duration
	ReleaseTimeout time.Duration
	LockOptions    []core.LockOption
	LimitReached   func(c C) error
	ErrorHandler   func(c C, status int, err error) error
	FailOpen       bool
	Route          string
	Limit          int
	Shared         bool
	Logger         *slog.Logger
	MaxBodySize    int
	ContextValue   func(c C, name string) (string, bool)
}

// withDefaults returns cfg with its answers, body bound and {ctx.name}
// reader taken from def (the adapter's ConfigDefault, read at setup) when
// they are zero; the Logger is ConfigEngine's default.
func (cfg Config[C]) withDefaults(def Config[C]) Config[C] {
	if cfg.LimitReached == nil {
		cfg.LimitReached = def.LimitReached
	}
	if cfg.ErrorHandler == nil {
		cfg.ErrorHandler = def.ErrorHandler
	}
	if cfg.MaxBodySize == 0 {
		cfg.MaxBodySize = def.MaxBodySize
	}
	if cfg.ContextValue == nil {
		cfg.ContextValue = def.ContextValue
	}
	return cfg
}

// Shim is the part of a fiberlock middleware (a lockhttp.Shim) that Fiber
// v2 and v3 share: skipping (Config.Next), the key, the chain run as it
// is, and the busy and error answers. The adapter's middleware embeds it
// and adds what differs: Route, Context and Locked.
type Shim[C Handle] struct {
	cfg       Config[C]
	unescaped func(c C) bool
}

// Setup checks cfg, its zero fields set from def (the adapter's
// ConfigDefault), and returns the engine on self, the adapter's
// middleware embedding s. unescaped reports whether c's app decodes path
// parameters itself (fiber.Config.UnescapePath). Errors are
// lockhttp.ConfigEngine's, named "fiberlock".
func (s *Shim[C]) Setup(cfg, def Config[C], unescaped func(c C) bool, self lockhttp.Shim[C, error]) (lockhttp.Engine[C, error], error) {
	s.cfg, s.unescaped = cfg.withDefaults(def), unescaped
	cfg = s.cfg
	return lockhttp.ConfigEngine("fiberlock", lockhttp.Fields{Locker: cfg.Locker, Key: cfg.Key, Template: cfg.Template,
		Wait: cfg.Wait, TTL: cfg.TTL, ReleaseTimeout: cfg.ReleaseTimeout, LockOptions: cfg.LockOptions,
		MaxBodySize: int64(cfg.MaxBodySize), Route: cfg.Route, Limit: cfg.Limit, Shared: cfg.Shared, FailOpen: cfg.FailOpen, Logger: cfg.Logger}, nil, self)
}

// Skip runs Config.Next.
func (s *Shim[C]) Skip(c C) bool { return s.cfg.Next != nil && s.cfg.Next(c) }

// Key reads the route's key; a body over Config.MaxBodySize is a 413
// before anything is read.
func (s *Shim[C]) Key(c C, route *lockhttp.Route) (string, int, error) {
	if route.Body && len(c.Body()) > s.cfg.MaxBodySize {
		return "", http.StatusRequestEntityTooLarge, lockhttp.BodyTooLarge()
	}
	q := Request[C]{C: c, Unescaped: s.unescaped, Ctx: s.cfg.ContextValue}
	return route.Key(q.Lookup)
}

// Next runs the rest of the chain as it is.
func (s *Shim[C]) Next(c C) error { return c.Next() }

// Busy sets Retry-After and runs Config.LimitReached.
func (s *Shim[C]) Busy(c C, retryAfter string, _ error) error {
	c.Set("Retry-After", retryAfter)
	return s.cfg.LimitReached(c)
}

// Error sets Retry-After when given and runs Config.ErrorHandler.
func (s *Shim[C]) Error(c C, status int, retryAfter string, err error) error {
	if retryAfter != "" {
		c.Set("Retry-After", retryAfter)
	}
	return s.cfg.ErrorHandler(c, status, err)
}
