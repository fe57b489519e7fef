package fiberlock_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/middleware/fiber"
	"github.com/lockgate/lockgate/redistest"
)

// The behaviour every HTTP adapter shares (bad input, busy, Redis down,
// lost locks, panics, one at a time, ...) is checked by the suite
// (suite_test.go); the tests here are Fiber's own.

// TestLocalsAndUserContext: {ctx.user} reads c.Locals set by earlier
// middleware, c.UserContext() is the lease's Context while the handler
// runs, and after the middleware the user context is live again and
// FromContext is nil.
func TestLocalsAndUserContext(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	type seen struct {
		key   string
		same  bool
		after bool // the user context after the middleware is live again
	}
	got := make(chan seen, 1)
	f := newApp()
	f.Use(func(c *fiber.Ctx) error { // an auth middleware
		c.Locals("user", 42)
		err := c.Next()
		s := <-got
		s.after = c.UserContext().Err() == nil && fiberlock.FromContext(c) == nil
		got <- s
		return err
	})
	f.Post("/v/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{ctx.user}:{voucher}"}), func(c *fiber.Ctx) error {
		lease := fiberlock.FromContext(c)
		got <- seen{key: lease.Key(), same: c.UserContext() == lease.Context()}
		return nil
	})
	a := start(t, f)
	if r := a.do(locktest.Context(t), "POST", "/v/a:b", "", ""); r.Err != nil || r.Status != 200 {
		t.Fatalf("status %d %v %s", r.Status, r.Err, r.Body)
	}
	if s := <-got; s.key != "order:42:a%3Ab" || !s.same || !s.after {
		t.Fatalf("handler saw %+v", s)
	}
}

// TestNextSkips: Config.Next skips the middleware: a skipped request runs
// without a lease even with no id (which would be 400). The control: the
// same route not skipped locks (the handler sees the lease) and refuses a
// request without the id.
func TestNextSkips(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	f := newApp()
	f.Post("/x", fiberlock.New(fiberlock.Config{Locker: l, Key: "x:{query.id}", Next: func(c *fiber.Ctx) bool { return c.Get("X-Skip") != "" }}),
		func(c *fiber.Ctx) error {
			if lease := fiberlock.FromContext(c); lease != nil {
				return c.SendString("locked " + lease.Key())
			}
			return c.SendString("no lease")
		})
	a := start(t, f)
	ctx := locktest.Context(t)
	skip := http.Header{"X-Skip": {"1"}}
	for _, c := range []struct {
		name   string
		header http.Header
		path   string
		status int
		body   string
	}{
		{"skipped, no id", skip, "/x", 200, "no lease"},
		{"skipped, with id", skip, "/x?id=1", 200, "no lease"},
		{"control: not skipped", nil, "/x?id=1", 200, "locked x:1"},
		{"control: not skipped, no id", nil, "/x", 400, ""},
	} {
		r := locktest.Send(ctx, a.client, "POST", a.URL+c.path, c.header, "", "")
		if r.Err != nil || r.Status != c.status || c.body != "" && r.Body != c.body {
			t.Errorf("%s: %d %q %v, want %d %q", c.name, r.Status, r.Body, r.Err, c.status, c.body)
		}
	}
}

// TestErrorReleases: a handler that returns an error (answered by Fiber's
// error handler) has its lock released: the next request obtains it with
// no wait at all. (A panic is the suite's PanicReleases.)
func TestErrorReleases(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	var calls atomic.Int32
	f := newApp()
	f.Post("/seckill/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{query.user_id}:{path.voucher}", Wait: core.NoWait}),
		func(c *fiber.Ctx) error {
			if calls.Add(1) == 1 {
				return fiber.NewError(fiber.StatusTeapot, "handler error")
			}
			return nil
		})
	a := start(t, f)
	ctx := locktest.Context(t)
	rc := srv.Client(t)
	for i, want := range []int{http.StatusTeapot, http.StatusOK} {
		r := a.do(ctx, "POST", "/seckill/7?user_id=1", "", "")
		if r.Err != nil || r.Status != want {
			t.Fatalf("request %d: %d %v %s, want %d", i, r.Status, r.Err, r.Body, want)
		}
		if locktest.Held(t, ctx, rc, "order:1:7") {
			t.Fatalf("request %d: lock key still exists", i)
		}
	}
}

// TestPathParamsDecodedOnce: route parameters are percent-decoded for the
// key (the suite's PathUnescaped), once: an app whose UnescapePath already
// decoded them is not decoded again (its /seckill/%2537 is the voucher
// "%37", not 7), and a malformed escape is a 400 naming the parameter.
func TestPathParamsDecodedOnce(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	key := func(c *fiber.Ctx) error { return c.SendString(fiberlock.FromContext(c).Key()) }
	raw := newApp()
	raw.Post("/seckill/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{path.voucher}"}), key)
	decoded := newApp(fiber.Config{UnescapePath: true})
	decoded.Post("/seckill/:voucher", fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{path.voucher}"}), key)
	ctx := locktest.Context(t)
	rawApp, decodedApp := start(t, raw), start(t, decoded)
	for _, c := range []struct {
		app        *app
		path, want string
	}{
		{rawApp, "/seckill/%37", "order:7"},
		{rawApp, "/seckill/%2537", "order:%2537"}, // the voucher "%37"
		{decodedApp, "/seckill/%37", "order:7"},
		{decodedApp, "/seckill/%2537", "order:%2537"},
	} {
		if r := c.app.do(ctx, "POST", c.path, "", ""); r.Err != nil || r.Status != 200 || r.Body != c.want {
			t.Errorf("%s: %d %v %q, want 200 under %s", c.path, r.Status, r.Err, r.Body, c.want)
		}
	}
	// Go's client does not send a malformed URL; the opaque form goes as is.
	req, _ := http.NewRequestWithContext(ctx, "POST", rawApp.URL, nil)
	req.URL.Opaque = "/seckill/a%zzb"
	resp, err := rawApp.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("malformed escape: %d %s, want 400", resp.StatusCode, body)
	}
	if msg := locktest.ErrorText(t, string(body)); !strings.HasPrefix(msg, "path.voucher: invalid value") {
		t.Fatalf("malformed escape: text %q", msg)
	}
}
