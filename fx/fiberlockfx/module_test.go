package fiberlockfx_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/lockgate/lockgate/fx/fiberlockfx"
	"github.com/lockgate/lockgate/fx/lockfx"
	fiberlock "github.com/lockgate/lockgate/middleware/fiber"
	"github.com/lockgate/lockgate/redistest"
)

// leaseKey answers the key of the lease the handler runs under ("" when
// none).
func leaseKey(c *fiber.Ctx) error { return c.SendString(fiberlock.Lease(c).Key()) }

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
		fx.Supply(fx.Annotate(client, fx.As(new(redis.UniversalClient)))),
		lockfx.Module,
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
