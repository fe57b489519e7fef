package fiberlockfx_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/fx/fiberlockfx"
	"github.com/lockgate/lockgate/internal/fxlocktest"
	"github.com/lockgate/lockgate/internal/locktest"
	fiberlock "github.com/lockgate/lockgate/middleware/fiber"
	"github.com/lockgate/lockgate/redistest"
)

// leaseKey answers the key of the lease the handler runs under ("" when
// none).
func leaseKey(c *fiber.Ctx) error { return c.SendString(fiberlock.FromContext(c).Key()) }

// newApp has a locked route and the same handler unlocked (the control).
func newApp(f *fiberlockfx.Factory) *fiber.App {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Post("/order/:voucher", f.Key("order:{query.user}:{path.voucher}"), leaseKey)
	app.Post("/plain/:voucher", leaseKey)
	return app
}

func post(t *testing.T, app *fiber.App, url string) (int, string) {
	t.Helper()
	resp, err := app.Test(httptest.NewRequest(http.MethodPost, url, nil), 10_000)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestModule: start, a request through the locked route runs under the
// lease (the control route does not), Defaults apply, stop; nothing leaks
// (TestMain).
func TestModule(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	var app *fiber.App
	fxApp := fxtest.New(t,
		fxlocktest.FxLocker(client),
		fx.Supply(&fiberlockfx.Defaults{
			TTL: 5 * time.Second,
			ErrorHandler: func(c *fiber.Ctx, status int, err error) error {
				return c.Status(status).SendString("defaults: " + err.Error())
			},
		}),
		fiberlockfx.Module,
		fx.Provide(newApp),
		fx.Populate(&app),
	)
	fxApp.RequireStart()

	if code, body := post(t, app, "/order/7?user=u1"); code != http.StatusOK || body != "order:u1:7" {
		t.Fatalf("locked route: %d %q, want 200 with the lease key order:u1:7", code, body)
	}
	if code, body := post(t, app, "/plain/7?user=u1"); code != http.StatusOK || body != "" {
		t.Fatalf("control route: %d %q, want 200 without a lease", code, body)
	}
	// The Defaults' ErrorHandler answers the key error.
	if code, body := post(t, app, "/order/7"); code != http.StatusBadRequest || !strings.HasPrefix(body, "defaults: ") || !strings.Contains(body, "query.user") {
		t.Fatalf("locked route without user: %d %q, want 400 from the Defaults' handler naming query.user", code, body)
	}
	fxApp.RequireStop()
}

// TestFactoryWithoutFx: the Factory works without fx; a nil Locker is an
// error of NewFactory, a bad route config a panic of New at setup.
func TestFactoryWithoutFx(t *testing.T) {
	if f, err := fiberlockfx.NewFactory(fiberlockfx.Params{}); !errors.Is(err, core.ErrInvalid) || f != nil {
		t.Fatalf("NewFactory with no Locker: %v, want core.ErrInvalid", err)
	}
	srv := redistest.Start(t)
	l := locktest.Locker(t, srv.Client(t))
	f, err := fiberlockfx.NewFactory(fiberlockfx.Params{Locker: l, Defaults: &fiberlockfx.Defaults{FailOpen: true}})
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]fiberlock.Config{
		"no key":     {},
		"bad key":    {Key: "order:{query.user"},
		"bad TTL":    {Key: "order:{query.user}", TTL: time.Millisecond},
		"bad wait":   {Key: "order:{query.user}", Wait: -time.Second},
		"nil option": {Key: "order:{query.user}", LockOptions: []core.LockOption{nil}},
	} {
		if v := locktest.Panics(func() { f.New(cfg) }); v == nil {
			t.Errorf("%s: New did not panic", name)
		}
	}
	if v := locktest.Panics(func() { (&fiberlockfx.Factory{}).Key("order:{query.user}") }); v == nil {
		t.Error("a zero Factory (no Locker) did not panic")
	}
}

// TestBadDefaults: bad Defaults (FailOpen on) fail the application's start,
// naming the field — they never reach a route or a request. The control:
// good Defaults start and serve under the lock.
func TestBadDefaults(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	cases := []struct {
		name  string
		def   fiberlockfx.Defaults
		names string
	}{
		{"TTL below minimum", fiberlockfx.Defaults{TTL: time.Millisecond}, "TTL"},
		{"negative TTL", fiberlockfx.Defaults{TTL: -time.Second}, "TTL"},
		{"negative wait", fiberlockfx.Defaults{Wait: -2 * time.Second}, "Wait"},
		{"negative release timeout", fiberlockfx.Defaults{ReleaseTimeout: -time.Second}, "ReleaseTimeout"},
		{"negative body size", fiberlockfx.Defaults{MaxBodySize: -1}, "MaxBodySize"},
		{"invalid core option", fiberlockfx.Defaults{LockOptions: []core.LockOption{core.WithTTL(time.Millisecond)}}, "LockOptions"},
		{"nil core option", fiberlockfx.Defaults{LockOptions: []core.LockOption{nil}}, "LockOptions"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			def := c.def
			def.FailOpen = true
			app := fx.New(fx.NopLogger,
				fxlocktest.FxLocker(client),
				fx.Supply(&def),
				fiberlockfx.Module,
				fx.Invoke(func(*fiberlockfx.Factory) {}),
			)
			err := app.Start(locktest.Context(t))
			if err == nil {
				app.Stop(locktest.Context(t))
				t.Fatal("started with bad Defaults")
			}
			if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), c.names) || !strings.Contains(err.Error(), "fiberlockfx: Defaults") {
				t.Fatalf("start error %v, want one matching core.ErrInvalid naming %s", err, c.names)
			}
		})
	}
	t.Run("control: good defaults", func(t *testing.T) {
		var app *fiber.App
		fxApp := fxtest.New(t,
			fxlocktest.FxLocker(client),
			fx.Supply(&fiberlockfx.Defaults{FailOpen: true, TTL: core.MinTTL, Wait: core.NoWait, ReleaseTimeout: time.Second, MaxBodySize: 1,
				LockOptions: []core.LockOption{core.WithWatchdog()}}),
			fiberlockfx.Module,
			fx.Provide(newApp),
			fx.Populate(&app),
		)
		fxApp.RequireStart()
		defer fxApp.RequireStop()
		if code, body := post(t, app, "/order/7?user=u1"); code != http.StatusOK || body != "order:u1:7" {
			t.Fatalf("locked route: %d %q, want 200 with the lease key order:u1:7", code, body)
		}
	})
}

// TestOptions: pieces of Defaults from the OptionsGroup and the graph's
// *Defaults apply together; a field set by two of them, or a bad value in a
// piece, fails the application's start naming the field.
func TestOptions(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	var app *fiber.App
	fxApp := fxtest.New(t,
		fxlocktest.FxLocker(client),
		fx.Supply(&fiberlockfx.Defaults{TTL: 5 * time.Second}),
		fiberlockfx.Options(fiberlockfx.Defaults{
			ErrorHandler: func(c *fiber.Ctx, status int, err error) error {
				return c.Status(status).SendString("options: " + err.Error())
			},
		}),
		fiberlockfx.Options(fiberlockfx.Defaults{Wait: core.NoWait}),
		fiberlockfx.Module,
		fx.Provide(newApp),
		fx.Populate(&app),
	)
	fxApp.RequireStart()
	if code, body := post(t, app, "/order/7?user=u1"); code != http.StatusOK || body != "order:u1:7" {
		t.Fatalf("locked route: %d %q, want 200 with the lease key order:u1:7", code, body)
	}
	if code, body := post(t, app, "/order/7"); code != http.StatusBadRequest || !strings.HasPrefix(body, "options: ") || !strings.Contains(body, "query.user") {
		t.Fatalf("locked route without user: %d %q, want 400 from the Options' handler naming query.user", code, body)
	}
	fxApp.RequireStop()

	cases := []struct {
		name  string
		opts  fx.Option
		names string
	}{
		{"field set twice", fx.Options(fx.Supply(&fiberlockfx.Defaults{TTL: 5 * time.Second}), fiberlockfx.Options(fiberlockfx.Defaults{TTL: 6 * time.Second})), "Defaults.TTL"},
		{"field set twice in the group", fiberlockfx.Options(fiberlockfx.Defaults{Wait: time.Second}, fiberlockfx.Defaults{Wait: core.NoWait}), "Defaults.Wait"},
		{"bad value", fiberlockfx.Options(fiberlockfx.Defaults{TTL: time.Millisecond}), "TTL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			app := fx.New(fx.NopLogger,
				fxlocktest.FxLocker(client),
				c.opts,
				fiberlockfx.Module,
				fx.Invoke(func(*fiberlockfx.Factory) {}),
			)
			err := app.Start(locktest.Context(t))
			if err == nil {
				app.Stop(locktest.Context(t))
				t.Fatal("started")
			}
			if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), c.names) || !strings.Contains(err.Error(), "fiberlockfx: Defaults") {
				t.Fatalf("start error %v, want one matching core.ErrInvalid naming %s", err, c.names)
			}
		})
	}
}
