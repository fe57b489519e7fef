package fiberlock_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"

	"github.com/lockgate/lockgate/internal/locktest"
)

// newApp returns a Fiber app with the recover middleware in front, as a
// real service has it; config (at most one) is the app's.
func newApp(config ...fiber.Config) *fiber.App {
	var cfg fiber.Config
	if len(config) > 0 {
		cfg = config[0]
	}
	cfg.DisableStartupMessage = true
	app := fiber.New(cfg)
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

func start(t testing.TB, f *fiber.App) *app {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		f.Listener(ln)
	}()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		f.ShutdownWithTimeout(10 * time.Second)
		<-served
	})
	return &app{URL: "http://" + ln.Addr().String(), client: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

func (a *app) do(ctx context.Context, method, path, ctype, body string) locktest.Result {
	return locktest.Do(ctx, a.client, method, a.URL+path, ctype, body)
}
