package fiberlock_test

import (
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	fiberlock "github.com/lockgate/lockgate/middleware/fiber"
	"github.com/lockgate/lockgate/redistest"
)

// The route's lock events name the key template, not the key.
func TestEventsNameTheTemplate(t *testing.T) {
	srv := redistest.Start(t)
	rec := &locktest.Patterns{}
	l := newLocker(t, srv, core.WithObserver(rec))
	app := newApp()
	app.Get("/orders/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{path.voucher:int}"}), func(c *fiber.Ctx) error { return c.SendString("ok") })
	resp, err := app.Test(httptest.NewRequest("GET", "/orders/7", nil), -1)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != fiber.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if msg := rec.Check("order:", "order:{path.voucher:int}"); msg != "" {
		t.Fatal(msg)
	}
}
