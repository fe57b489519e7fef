package lockhttp

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// Setup checks the settings every HTTP adapter has — the wait, the TTL, the
// release timeout, further core lock options and the body bound — as they
// are given, keeps the first error, and compiles a route from them. The
// adapters with options (httplock, ginlock) call it from each option, the
// ones with a Config (fiberlock, echolock) once per field; their errors
// read "<adapter>: <name>: ...", name being the option (WithWait) or the
// field (Config.Wait), and match core.ErrInvalid.
type Setup struct {
	adapter  string
	lockOpts []core.LockOption // in the order given, each already checked
	maxBody  int64
	route    string // the route's pattern, when the adapter was told it
	rname    string // the name of the setting that told it (WithRoute)
	limit    int    // holders of one key at once; 0: one, the lock
	lname    string // the name of the setting that set limit (WithLimit)
	shared   bool   // the key's lock taken shared (RLock)
	sname    string // the name of the setting that set shared (WithShared)
	err      error
}

// Limit makes the route admit up to n requests of one key at once, each
// holding a permit of the semaphore named by the key
// (core.Locker.Semaphore) instead of its lock. n below 1 is an error: name
// is an option (WithLimit) that was given a value.
func (s *Setup) Limit(name string, n int) {
	if n < 1 {
		s.Fail(s.Invalid(name, "limit %d is below 1", n))
		return
	}
	s.limit, s.lname = n, name
}

// Shared makes the route take its key's lock shared with the other shared
// requests of the key (core.Locker.RLock) instead of exclusively: name is
// the setting (WithShared, Config.Shared). With a limit it is an error of
// Route, whichever was given first.
func (s *Setup) Shared(name string) {
	s.shared, s.sname = true, name
}

// ConfigLimit is Limit for a Config field (Config.Limit), whose zero value
// sets nothing: 0 keeps the lock, a negative value is an error.
func (s *Setup) ConfigLimit(name string, n int) {
	if n != 0 {
		s.Limit(name, n)
	}
}

// RoutePattern tells the setup the pattern of the route the middleware
// serves (name is the setting, WithRoute or Config.Route): Route then
// checks that the template's path placeholders are its parameters
// (CheckRoute). "" checks nothing.
func (s *Setup) RoutePattern(name, pattern string) {
	s.route, s.rname = pattern, name
}

// NewSetup returns the settings of an adapter named adapter ("httplock"),
// with the body bound at keyfunc.DefaultMaxBodySize and no lock options.
func NewSetup(adapter string) Setup {
	return Setup{adapter: adapter, maxBody: keyfunc.DefaultMaxBodySize}
}

// Fail records err unless an earlier error was recorded.
func (s *Setup) Fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// MaxBody is the body bound set, or keyfunc.DefaultMaxBodySize.
func (s *Setup) MaxBody() int64 { return s.maxBody }

// Invalid is the error of setting name with an invalid value: it names the
// adapter and the setting and matches core.ErrInvalid.
func (s *Setup) Invalid(name, format string, args ...any) error {
	return fmt.Errorf("%s: %s: "+format+": %w", append([]any{s.adapter, name}, append(args, core.ErrInvalid)...)...)
}

// Errorf is an error of the adapter's: "<adapter>: " and the text.
func (s *Setup) Errorf(format string, args ...any) error {
	return fmt.Errorf("%s: "+format, append([]any{s.adapter}, args...)...)
}

// add checks opt on its own, so that the error names the setting, and
// appends it.
func (s *Setup) add(name string, opt core.LockOption) {
	if _, err := core.Combine(opt); err != nil {
		s.Fail(fmt.Errorf("%s: %s: %w", s.adapter, name, err))
		return
	}
	s.lockOpts = append(s.lockOpts, opt)
}

// Wait sets how long a request waits for a busy lock: core.NoWait is a
// single attempt, 0 sets nothing, another negative value is an error.
func (s *Setup) Wait(name string, d time.Duration) {
	switch {
	case d == 0:
	case d < 0 && d != core.NoWait:
		s.Fail(s.Invalid(name, "wait %v is negative (use core.NoWait for a single attempt)", d))
	default:
		s.add(name, core.WithWait(d))
	}
}

// TTL sets the lease time; 0 sets nothing, a value below core.MinTTL is an
// error (core.WithTTL's).
func (s *Setup) TTL(name string, d time.Duration) {
	if d != 0 {
		s.add(name, core.WithTTL(d))
	}
}

// ReleaseTimeout sets how long the release waits for Redis; 0 sets
// nothing, a negative value is an error.
func (s *Setup) ReleaseTimeout(name string, d time.Duration) {
	switch {
	case d == 0:
	case d < 0:
		s.Fail(s.Invalid(name, "release timeout %v is negative", d))
	default:
		s.add(name, core.WithReleaseTimeout(d))
	}
}

// LockOptions appends further core lock options, in order; a nil or
// invalid one is an error.
func (s *Setup) LockOptions(name string, opts []core.LockOption) {
	for i, opt := range opts {
		if opt == nil {
			s.Fail(s.Invalid(name, "option %d is nil", i))
			return
		}
		s.add(name, opt)
	}
}

// MaxBodySize bounds the body read for the key; 0 sets nothing, a negative
// value is an error.
func (s *Setup) MaxBodySize(name string, n int64) {
	switch {
	case n < 0:
		s.Fail(s.Invalid(name, "%d is negative", n))
	case n > 0:
		s.maxBody = n
	}
}

// Route is what a request needs of a route's setup.
type Route struct {
	Template *keyfunc.Template // valid for HTTP
	LockOpts []core.LockOption // the route's lock options combined: one
	Body     bool              // the key reads the body ({body.*}, {form.*}, bare names)
	// Limit is how many requests of one key hold it at once: 0 takes the
	// key's lock (one at a time), N > 0 one of N permits of the semaphore
	// named by the key (core.Locker.Semaphore).
	Limit int
	// Shared takes the key's lock shared with the other shared requests
	// of the key (core.Locker.RLock); never with a Limit.
	Shared bool
}

// Key resolves the route's key with lookup; on failure it returns the
// status to answer, 400 (a key error).
func (r *Route) Key(lookup keyfunc.Lookup) (string, int, error) {
	key, err := r.Template.Key(lookup)
	if err != nil {
		return "", http.StatusBadRequest, err
	}
	return key, 0, nil
}

// BodyTooLarge is the error of a body found over its bound before it is
// read (413): a *keyfunc.Error for the body matching
// keyfunc.ErrBodyTooLarge.
func BodyTooLarge() error { return &keyfunc.Error{Part: "body", Err: keyfunc.ErrBodyTooLarge} }

// Route returns the first error recorded, or the route of template t
// (already valid for HTTP) with the lock options combined after
// core.WithPattern(t's text): observations name the route's lock by its
// template (the lock options may name it otherwise), never by the key. A
// failure to combine them is named combined.
func (s *Setup) Route(t *keyfunc.Template, combined string) (Route, error) {
	if s.err != nil {
		return Route{}, s.err
	}
	if s.shared && s.limit > 0 {
		return Route{}, s.Invalid(s.sname, "a shared lock has no limit (%s %d): a route takes its key's lock shared or a permit of its semaphore, not both", s.lname, s.limit)
	}
	if err := CheckRoute(t, s.route); err != nil {
		return Route{}, fmt.Errorf("%s: %s: %w", s.adapter, s.rname, err)
	}
	opt, err := core.Combine(append([]core.LockOption{core.WithPattern(t.String())}, s.lockOpts...)...)
	if err != nil {
		return Route{}, fmt.Errorf("%s: %s: %w", s.adapter, combined, err)
	}
	return Route{
		Template: t,
		LockOpts: []core.LockOption{opt},
		Body:     t.Uses(keyfunc.SourceBody) || t.Uses(keyfunc.SourceForm),
		Limit:    s.limit,
		Shared:   s.shared,
	}, nil
}

// ForHTTP checks a template given as such: nil is an ErrBadTemplate error
// naming it, and so is one naming a source HTTP cannot read.
func (s *Setup) ForHTTP(name string, t *keyfunc.Template) (*keyfunc.Template, error) {
	if t == nil {
		return nil, fmt.Errorf("%s: nil %s: %w", s.adapter, name, keyfunc.ErrBadTemplate)
	}
	return t.For(keyfunc.HTTP())
}

// ConfigTemplate is the template of a Config with a Key and a Template
// field (fiberlock, echolock): Template when set, else Key compiled for
// HTTP; neither is an ErrBadTemplate error, and every error names the field
// at fault (Config.Key or Config.Template).
func (s *Setup) ConfigTemplate(key string, t *keyfunc.Template) (*keyfunc.Template, error) {
	field := "Config.Template"
	if t == nil {
		if key == "" {
			return nil, s.Errorf("Config.Key (or Config.Template) is required: %w", keyfunc.ErrBadTemplate)
		}
		c, err := keyfunc.Compile(key, keyfunc.HTTP())
		if err != nil {
			return nil, s.Errorf("Config.Key: %w", err)
		}
		t, field = c, "Config.Key"
	}
	t, err := t.For(keyfunc.HTTP())
	if err != nil {
		return nil, s.Errorf("%s: %w", field, err)
	}
	return t, nil
}

// Fields are the settings of an adapter with a Config (fiberlock,
// echolock), its fields of the same names.
type Fields struct {
	Locker                    *core.Locker
	Key                       string
	Template                  *keyfunc.Template
	Wait, TTL, ReleaseTimeout time.Duration
	LockOptions               []core.LockOption
	MaxBodySize               int64
	Route                     string // the route's pattern: "" checks nothing
	Limit                     int    // 0: the lock; N > 0: N holders of a key at once
	Shared                    bool   // the lock taken shared (RLock); not with Limit
	FailOpen                  bool
	Logger                    *slog.Logger // nil: slog.Default()
}

// ConfigRoute checks f, each error naming its field (Config.Wait), and
// returns the route: ConfigTemplate, then Wait, TTL, ReleaseTimeout,
// LockOptions, MaxBodySize, Limit and Shared, then Route.
func (s *Setup) ConfigRoute(f Fields) (Route, error) {
	t, err := s.ConfigTemplate(f.Key, f.Template)
	if err != nil {
		return Route{}, err
	}
	s.Wait("Config.Wait", f.Wait)
	s.TTL("Config.TTL", f.TTL)
	s.ReleaseTimeout("Config.ReleaseTimeout", f.ReleaseTimeout)
	s.LockOptions("Config.LockOptions", f.LockOptions)
	s.MaxBodySize("Config.MaxBodySize", f.MaxBodySize)
	s.ConfigLimit("Config.Limit", f.Limit)
	if f.Shared {
		s.Shared("Config.Shared")
	}
	s.RoutePattern("Config.Route", f.Route)
	return s.Route(t, "Config.LockOptions")
}

// ConfigEngine is the engine of an adapter with a Config, named adapter
// ("echolock"), on shim: noLocker for a nil f.Locker (when noLocker is
// nil, an error matching core.ErrInvalid naming Config.Locker), then the
// route of f (ConfigRoute).
func ConfigEngine[C, R any](adapter string, f Fields, noLocker error, shim Shim[C, R]) (Engine[C, R], error) {
	s := NewSetup(adapter)
	if f.Locker == nil {
		if noLocker == nil {
			noLocker = s.Invalid("Config.Locker", "required")
		}
		return Engine[C, R]{}, noLocker
	}
	route, err := s.ConfigRoute(f)
	if err != nil {
		return Engine[C, R]{}, err
	}
	if f.Logger == nil {
		f.Logger = slog.Default()
	}
	LogConstant(f.Logger, adapter, route.Template)
	return Engine[C, R]{Locker: f.Locker, Route: route, FailOpen: f.FailOpen, Logger: f.Logger, Shim: shim, Logged: new(sync.Map)}, nil
}

// LogConstant says at setup, at info, that template t has no placeholder:
// allowed, but every request of the route takes the same lock, one at a
// time.
func LogConstant(logger *slog.Logger, adapter string, t *keyfunc.Template) {
	if Constant(t) {
		logger.Log(context.Background(), slog.LevelInfo, adapter+": the key template has no placeholder: every request of the route takes the same lock",
			slog.String("pattern", t.String()))
	}
}
