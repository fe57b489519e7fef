package fiberlock_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/gofiber/fiber/v3/middleware/recover"

	"github.com/lockgate/lockgate/internal/locktest"
)

// newApp returns a Fiber app with the recover middleware in front, as a
// real service has it.
func newApp() *fiber.App {
	app := fiber.New()
	// fasthttp's worker-pool cleaner only notices Shutdown after sleeping
	// this long (default 10s); keep it short so the leak check sees it gone.
	app.Server().MaxIdleWorkerDuration = 50 * time.Millisecond
	app.Use(recover.New())
	return app
}

// app is a Fiber app served on a real loopback listener.
type app struct {
	URL    string
	client *http.Client
}

// start serves f on a loopback listener until t's cleanup, which shuts it
// down (waiting for the handlers) and waits for Listener to return. The
// cleanup also closes the listener: a Shutdown that comes before Serve has
// registered it (a test that ends before its first request) returns at
// once, and Serve then returns on the closed listener instead of serving
// for ever.
func start(t testing.TB, f *fiber.App) *app {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- f.Listener(ln, fiber.ListenConfig{DisableStartupMessage: true}) }()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		if err := f.ShutdownWithTimeout(10 * time.Second); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		ln.Close()
		if err := <-served; err != nil {
			t.Errorf("Listener: %v", err)
		}
	})
	return &app{URL: "http://" + ln.Addr().String(), client: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

func (a *app) do(ctx context.Context, method, path, ctype, body string) locktest.Result {
	return locktest.Do(ctx, a.client, method, a.URL+path, ctype, body)
}
