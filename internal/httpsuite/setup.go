package httpsuite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/keyfunc"
)

// Settings are what a setup case gives an adapter, in the terms every HTTP
// adapter shares: the Locker, the key (a template string, or a Template,
// which wins), and the lock settings. Zero values set nothing. The
// adapter's Setup.New turns them into its options or Config; with options,
// in the order Wait, TTL, ReleaseTimeout, MaxBodySize, LockOptions, then
// Limit when it is not 0, then Shared when set.
type Settings struct {
	Locker         *core.Locker // nil: the "no Locker" case
	Key            string
	Template       *keyfunc.Template
	Wait           time.Duration
	TTL            time.Duration
	ReleaseTimeout time.Duration
	MaxBodySize    int64
	LockOptions    []core.LockOption
	Limit          int
	Shared         bool
}

// Setup is how one adapter is set up, for SetupErrors.
type Setup struct {
	// New sets the adapter's middleware up from s with fail-open on, so
	// that a bad setting can neither answer 503 to every request nor run
	// them without the lock. It reports whether a middleware came back
	// and the setup error (for Fiber, whose New panics: false and
	// Validate's error).
	New func(s Settings) (built bool, err error)
	// Must sets it up the panicking way (Must(New(...)), or Fiber's New):
	// SetupErrors checks what it panics with.
	Must func(s Settings)
	// Name is the text by which the adapter's errors name a setting of
	// Settings ("Locker", "Key", "Template", "Wait", "TTL",
	// "ReleaseTimeout", "MaxBodySize", "LockOptions", "Limit", "Shared"): "WithTTL" or
	// "Config.TTL". "" where its errors do not name it (a template error
	// of an adapter with options is keyfunc's own).
	Name func(setting string) string
}

// SetupCase is one bad setup: the settings, the error it must match, and
// the setting the error must name.
type SetupCase struct {
	Name     string
	Settings Settings
	Want     error
	Names    string // a Settings field name, mapped by Setup.Name
}

// SetupCases are the bad setups every HTTP adapter refuses, with l as the
// Locker where the case is not about the Locker.
func SetupCases(l *core.Locker) []SetupCase {
	const key = "order:{query.user_id}:{path.voucher}"
	bad := func(name string, s Settings, want error, names string) SetupCase {
		if names != "Locker" {
			s.Locker = l
		}
		return SetupCase{Name: name, Settings: s, Want: want, Names: names}
	}
	opts := func(o ...core.LockOption) []core.LockOption { return o }
	return []SetupCase{
		bad("no Locker", Settings{Key: key}, core.ErrInvalid, "Locker"),
		bad("no Locker, Template", Settings{Template: keyfunc.MustCompile(key)}, core.ErrInvalid, "Locker"),
		bad("empty key", Settings{}, keyfunc.ErrBadTemplate, "Key"),
		bad("unbalanced brace", Settings{Key: "order:{query.id"}, keyfunc.ErrBadTemplate, "Key"),
		bad("gRPC source", Settings{Key: "order:{field.id}"}, keyfunc.ErrBadTemplate, "Key"),
		bad("gRPC metadata", Settings{Key: "order:{md.x}"}, keyfunc.ErrBadTemplate, "Key"),
		bad("unknown source", Settings{Key: "o:{usr.id}"}, keyfunc.ErrBadTemplate, "Key"),
		bad("empty placeholder", Settings{Key: "a:{}"}, keyfunc.ErrBadTemplate, "Key"),
		bad("unknown type", Settings{Key: "o:{query.id:float}"}, keyfunc.ErrBadTemplate, "Key"),
		bad("gRPC template", Settings{Template: keyfunc.MustJoin(keyfunc.Const("o"), keyfunc.Field("id"))}, keyfunc.ErrBadTemplate, "Template"),
		bad("gRPC metadata template", Settings{Template: keyfunc.MustJoin(keyfunc.Const("o"), keyfunc.MD("x"))}, keyfunc.ErrBadTemplate, "Template"),
		bad("TTL below minimum", Settings{Key: key, TTL: 10 * time.Millisecond}, core.ErrInvalid, "TTL"),
		bad("TTL just below minimum", Settings{Key: key, TTL: core.MinTTL - 1}, core.ErrInvalid, "TTL"),
		bad("negative TTL", Settings{Key: key, TTL: -time.Second}, core.ErrInvalid, "TTL"),
		bad("negative wait", Settings{Key: key, Wait: -2 * time.Second}, core.ErrInvalid, "Wait"),
		bad("wait -2ns", Settings{Key: key, Wait: core.NoWait - 1}, core.ErrInvalid, "Wait"),
		bad("negative release timeout", Settings{Key: key, ReleaseTimeout: -time.Millisecond}, core.ErrInvalid, "ReleaseTimeout"),
		bad("negative body size", Settings{Key: "o:{body.id}", MaxBodySize: -1}, core.ErrInvalid, "MaxBodySize"),
		bad("nil lock option", Settings{Key: key, LockOptions: opts(core.WithoutWatchdog(), nil)}, core.ErrInvalid, "LockOptions"),
		bad("core TTL below minimum", Settings{Key: key, LockOptions: opts(core.WithTTL(time.Millisecond))}, core.ErrInvalid, "LockOptions"),
		bad("core negative wait", Settings{Key: key, LockOptions: opts(core.WithWait(-5 * time.Second))}, core.ErrInvalid, "LockOptions"),
		bad("core zero release timeout", Settings{Key: key, LockOptions: opts(core.WithReleaseTimeout(0))}, core.ErrInvalid, "LockOptions"),
		bad("negative limit", Settings{Key: key, Limit: -1}, core.ErrInvalid, "Limit"),
		bad("negative limit among good settings", Settings{Key: key, Wait: time.Second, MaxBodySize: 1, Limit: -3}, core.ErrInvalid, "Limit"),
		bad("shared with a limit", Settings{Key: key, Limit: 2, Shared: true}, core.ErrInvalid, "Shared"),
		bad("bad TTL among good settings", Settings{Key: key, Wait: time.Second, TTL: time.Nanosecond, ReleaseTimeout: time.Second, MaxBodySize: 1}, core.ErrInvalid, "TTL"),
	}
}

// SetupErrors checks every case of SetupCases against the adapter: the
// setup fails with an error matching the case's, naming its setting, and
// no middleware; the panicking form panics with an error of the same text.
// Its control is Run's GoodSettings case (good values of every setting
// serve under the lock); the adapter's own settings (nil handlers, zero
// values) stay in its tests.
func SetupErrors(t *testing.T, l *core.Locker, a Setup) {
	t.Helper()
	for _, c := range SetupCases(l) {
		t.Run(c.Name, func(t *testing.T) {
			if err := checkSetup(a, c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// checkSetup is SetupErrors' check of one case.
func checkSetup(a Setup, c SetupCase) error {
	built, err := a.New(c.Settings)
	if !errors.Is(err, c.Want) || built {
		return fmt.Errorf("error %v (middleware %v), want one matching %v and no middleware", err, built, c.Want)
	}
	if name := a.Name(c.Names); !strings.Contains(err.Error(), name) {
		return fmt.Errorf("error %q does not name %q", err, name)
	}
	v := locktest.Panics(func() { a.Must(c.Settings) })
	if pe, ok := v.(error); !ok || pe.Error() != err.Error() {
		return fmt.Errorf("the panicking form panicked with %v, want %v", v, err)
	}
	return nil
}

// OptionSetup is an adapter configured with functional options (httplock,
// ginlock): its constructors and the options of Settings. M is its
// middleware type, O its option type.
type OptionSetup[M, O any] struct {
	New            func(l *core.Locker, key string, opts ...O) (M, error)
	NewTemplate    func(l *core.Locker, t *keyfunc.Template, opts ...O) (M, error)
	Must           func(m M, err error) M
	Wait           func(time.Duration) O
	TTL            func(time.Duration) O
	ReleaseTimeout func(time.Duration) O
	MaxBodySize    func(int64) O
	LockOptions    func(...core.LockOption) O
	FailOpen       func() O
	Limit          func(int) O
	Shared         func() O
}

// OptionsSetupErrors is SetupErrors for an adapter with options, run with
// the fail-open option first and last, plus what only options have: a nil
// option, a nil template for NewTemplate, a bad value after a good one of
// the same option, a limit of 0 (an option given no limit), and a shared
// lock given before a limit (SetupErrors' case gives it after). Errors
// name the option ("WithTTL"); template errors are keyfunc's own.
func OptionsSetupErrors[M, O any](t *testing.T, l *core.Locker, a OptionSetup[M, O]) {
	t.Helper()
	const key = "order:{query.user_id}:{path.voucher}"
	var zero O
	for _, order := range []string{"fail-open first", "fail-open last"} {
		build := func(s Settings, extra ...O) (M, error) {
			opts := append([]O{a.Wait(s.Wait), a.TTL(s.TTL), a.ReleaseTimeout(s.ReleaseTimeout),
				a.MaxBodySize(s.MaxBodySize), a.LockOptions(s.LockOptions...)}, extra...)
			if s.Limit != 0 {
				opts = append(opts, a.Limit(s.Limit))
			}
			if s.Shared {
				opts = append(opts, a.Shared())
			}
			if order == "fail-open first" {
				opts = append([]O{a.FailOpen()}, opts...)
			} else {
				opts = append(opts, a.FailOpen())
			}
			if s.Template != nil {
				return a.NewTemplate(s.Locker, s.Template, opts...)
			}
			return a.New(s.Locker, s.Key, opts...)
		}
		setup := Setup{
			New:  func(s Settings) (bool, error) { m, err := build(s); return !isNil(m), err },
			Must: func(s Settings) { a.Must(build(s)) },
			Name: optionName,
		}
		t.Run(order, func(t *testing.T) {
			SetupErrors(t, l, setup)
			own := []struct {
				name  string
				build func() (M, error)
				want  error
				names string
			}{
				{"nil option", func() (M, error) { return build(Settings{Locker: l, Key: key}, zero) }, core.ErrInvalid, "nil"},
				{"nil template", func() (M, error) { return a.NewTemplate(l, nil, a.FailOpen()) }, keyfunc.ErrBadTemplate, "nil key template"},
				{"bad TTL after a good one", func() (M, error) {
					return build(Settings{Locker: l, Key: key}, a.TTL(time.Second), a.TTL(time.Nanosecond))
				}, core.ErrInvalid, "WithTTL"},
				{"limit 0", func() (M, error) { return build(Settings{Locker: l, Key: key}, a.Limit(0)) }, core.ErrInvalid, "WithLimit"},
				{"limit 0 after a good one", func() (M, error) { return build(Settings{Locker: l, Key: key}, a.Limit(3), a.Limit(0)) }, core.ErrInvalid, "WithLimit"},
				{"shared, then a limit", func() (M, error) { return build(Settings{Locker: l, Key: key}, a.Shared(), a.Limit(2)) }, core.ErrInvalid, "WithShared"},
			}
			for _, c := range own {
				t.Run(c.name, func(t *testing.T) {
					m, err := c.build()
					if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.names) || !isNil(m) {
						t.Fatalf("error %v (middleware %v), want one matching %v naming %q and no middleware", err, !isNil(m), c.want, c.names)
					}
				})
			}
		})
	}
}

// optionName is how an adapter with options names a setting of Settings.
func optionName(setting string) string {
	switch setting {
	case "Key", "Template":
		return "" // keyfunc's own error
	case "Locker":
		return "Locker"
	}
	return "With" + setting
}

// isNil reports whether m, a func-typed middleware, is nil.
func isNil(m any) bool {
	v := reflect.ValueOf(m)
	return !v.IsValid() || v.IsNil()
}

// ConfigName is how an adapter with a Config (fiberlock, echolock) names a
// setting of Settings: the field, "Config.TTL".
func ConfigName(setting string) string { return "Config." + setting }

// goodSettings is the control of SetupErrors, run by Run for every stack:
// a route with a good value of every setting the suite varies — fail-open,
// a single attempt, the minimum TTL, a release timeout, a body bound, core
// lock options — sets up and serves 200 under the lock, its key
// canonicalised by a typed placeholder (042 is 42). With the minimum TTL
// (50ms) and a single attempt (500ms), a loaded machine running the race
// detector can let the lease expire before the handler looks (past its
// Valid time: no renewal in time), or fail the attempt, fail-open then
// running the handler without it; the handler says which, and such a
// request is sent again, three times at most ("no lease held in Redis" was
// seen in two clean-clone runs). A lock missing from Redis while its lease
// is still valid fails at once. The validity is read before Redis is
// asked: a lease that ended before the handler looked (lost at its
// validity's end) says zero.
func goodSettings(t *testing.T, s Stack) {
	e := newEnv(t, s)
	l := e.locker()
	const notHeld = "lease not held: "
	h := func(_ context.Context, lease *core.Lease, _ Request) (int, string) {
		if lease == nil {
			return http.StatusInternalServerError, notHeld + "none (fail-open ran the handler)"
		}
		valid := lease.Valid()
		if e.inRedis(lease.Key()) {
			return http.StatusOK, lease.Key()
		}
		if time.Now().After(valid) {
			// The lease's own validity had ended (no renewal in time):
			// what the lease says, not a lock missing under a valid one.
			return http.StatusInternalServerError, notHeld + "past its validity before the handler looked"
		}
		return http.StatusInternalServerError, "no lease held in Redis"
	}
	base := e.serve(Route{Method: "POST", Path: seckillPath, Locker: l, Key: "order:{query.user_id:int}:{path.voucher}", Handler: h,
		Options: Options{
			FailOpen:       true,
			Wait:           core.NoWait,
			TTL:            core.MinTTL,
			ReleaseTimeout: time.Second,
			MaxBodySize:    1,
			LockOptions:    []core.LockOption{core.WithReleaseTimeout(time.Second), core.WithWatchdog()},
		}})
	for try := 1; ; try++ {
		r := e.post(base + "/seckill/7?user_id=042")
		if r.Err == nil && try < 3 && strings.HasPrefix(r.Body, notHeld) {
			t.Logf("try %d: %s; again", try, r.Body)
			continue
		}
		if r.Err != nil || r.Status != http.StatusOK || r.Body != "order:42:7" {
			t.Fatalf("status %d %v %q, want 200 with the lease order:42:7 held in Redis", r.Status, r.Err, r.Body)
		}
		return
	}
}
