package fiberlock_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v3"
	"github.com/gofiber/fiber/v3/middleware/recover"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	fiberlock "github.com/lockgate/lockgate/middleware/fiberv3"
	"github.com/lockgate/lockgate/redistest"
)

// TestPathDecoding: route parameters are locked percent-decoded once (the
// shared suite's PathUnescaped checks that %37 is 7): a bad escape is a
// 400 naming the parameter, and on an app with UnescapePath, which decodes
// them itself, they are not decoded twice: %2537 is the voucher "%37" (in
// the key, escaped, "%2537"), not 7, as on the default app.
func TestPathDecoding(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	route := func(f *fiber.App) *app {
		f.Post("/p/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{path.voucher}", Wait: core.NoWait}),
			func(c fiber.Ctx) error { return c.SendString(fiberlock.FromContext(c).Key()) })
		return start(t, f)
	}
	plain := route(newApp())
	unescaping := fiber.New(fiber.Config{UnescapePath: true})
	unescaping.Server().MaxIdleWorkerDuration = newApp().Server().MaxIdleWorkerDuration
	unescaping.Use(recover.New())
	decoded := route(unescaping)
	ctx := locktest.Context(t)

	// The Go client does not send a bad escape unless it is opaque.
	req, err := http.NewRequestWithContext(ctx, "POST", plain.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = "/p/a%zzb"
	resp, err := plain.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := locktest.Result{Status: resp.StatusCode, Body: string(body)}
	if r.Err != nil || r.Status != http.StatusBadRequest {
		t.Fatalf("bad escape: %d %v %s, want 400", r.Status, r.Err, r.Body)
	}
	if msg := locktest.ErrorText(t, r.Body); msg != "path.voucher: invalid value: not a valid percent-encoding" {
		t.Fatalf("bad escape: text %q", msg)
	}
	for _, c := range []struct {
		a          *app
		name, path string
		key        string
	}{
		{plain, "default app", "/p/%2537", "order:%2537"},    // the voucher "%37"
		{plain, "default app", "/p/a%3Ab", "order:a%3Ab"},    // "a:b"
		{decoded, "UnescapePath", "/p/%2537", "order:%2537"}, // Fiber decoded it to "%37": once
		{decoded, "UnescapePath", "/p/a%3Ab", "order:a%3Ab"},
	} {
		if r := c.a.do(ctx, "POST", c.path, "", ""); r.Err != nil || r.Status != 200 || r.Body != c.key {
			t.Errorf("%s %s: %d %v %q, want 200 under %s", c.name, c.path, r.Status, r.Err, r.Body, c.key)
		}
	}
}
