package echolock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"
	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/keyfunc"
	echolock "github.com/lockgate/lockgate/middleware/echov5"
	httplock "github.com/lockgate/lockgate/middleware/nethttp"
	"github.com/lockgate/lockgate/redistest"
)

// held reports whether the lock named name exists in Redis; for handlers,
// which must not fail the test from the server's goroutine.
func held(ctx context.Context, rc *redis.Client, name string) string {
	n, err := rc.Exists(ctx, locktest.RedisKey(name)).Result()
	switch {
	case err != nil:
		return "error: " + err.Error()
	case n == 1:
		return "held"
	}
	return "free"
}

// dbsize is the number of keys in Redis, or -1 when Redis cannot answer.
func dbsize(ctx context.Context, rc *redis.Client) int64 {
	n, err := rc.DBSize(ctx).Result()
	if err != nil {
		return -1
	}
	return n
}

// TestSkipper: a request the Skipper skips runs the handler without the
// lock: no key is built (a request missing the key's value is served, not
// 400), no lock is tried (it runs while another owner holds its key, where
// the control gets 429), FromContext is nil, and Redis holds nothing while
// it runs. The control, the same requests not skipped, is locked.
func TestSkipper(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	rc := srv.Client(t)
	ctx := locktest.Context(t)
	e := newEcho()
	e.POST("/x/:id", func(c *echo.Context) error {
		rctx := c.Request().Context()
		lease := echolock.FromContext(rctx)
		return c.String(http.StatusOK, fmt.Sprintf("lease=%v lock=%s", lease != nil, held(rctx, rc, "x:1:2")))
	}, echolock.Must(echolock.NewWithConfig(echolock.Config{
		Locker:  l,
		Key:     "x:{path.id}:{query.n}",
		Wait:    core.NoWait,
		Skipper: func(c *echo.Context) bool { return c.Request().Header.Get("X-Skip") != "" },
	})))
	s := start(t, e)
	do := func(path string, skip bool) locktest.Result {
		var h http.Header
		if skip {
			h = http.Header{"X-Skip": {"1"}}
		}
		return locktest.Send(ctx, s.client, "POST", s.URL+path, h, "", "")
	}
	check := func(name string, r locktest.Result, status int, body string) {
		t.Helper()
		if r.Err != nil || r.Status != status || (body != "" && r.Body != body) {
			t.Errorf("%s: %d %v %q, want %d %q", name, r.Status, r.Err, r.Body, status, body)
		}
	}
	check("skipped, no key value", do("/x/1", true), 200, "lease=false lock=free")
	check("skipped", do("/x/1?n=2", true), 200, "lease=false lock=free")
	if n := dbsize(ctx, rc); n != 0 {
		t.Fatalf("redis holds %d keys after skipped requests, want 0", n)
	}
	check("control: not skipped, no key value", do("/x/1", false), 400, "")
	check("control: not skipped", do("/x/1?n=2", false), 200, "lease=true lock=held")

	other, err := l.Lock(ctx, "x:1:2")
	if err != nil {
		t.Fatal(err)
	}
	check("skipped while another owner holds the key", do("/x/1?n=2", true), 200, "lease=false lock=held")
	check("control: not skipped while held", do("/x/1?n=2", false), 429, "")
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if h := held(ctx, rc, "x:1:2"); h != "free" {
		t.Fatalf("the lock is %s at the end, want free", h)
	}
}

// TestReturnedError: a handler that returns an error (an *echo.HTTPError,
// a plain error) or panics has its lock released before Echo's
// HTTPErrorHandler (or Recover) writes the answer: the app's error handler
// sees the lock free in Redis, the answer is the app's, and another owner
// takes the key at once. Each handler first checks the lock is held.
func TestReturnedError(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	other, _ := locktest.NewLocker(t, srv)
	rc := srv.Client(t)
	ctx := locktest.Context(t)
	var seen notes[string]
	e := newEcho()
	e.HTTPErrorHandler = func(c *echo.Context, err error) {
		seen.put("error handler "+c.Param("id"), held(c.Request().Context(), rc, "r:"+c.Param("id")))
		echo.DefaultHTTPErrorHandler(false)(c, err)
	}
	lock := echolock.Must(echolock.New(l, "r:{path.id}"))
	enter := func(c *echo.Context) {
		h := "no lease"
		if lease := echolock.FromContext(c.Request().Context()); lease != nil {
			h = held(c.Request().Context(), rc, lease.Key())
		}
		seen.put("handler "+c.Param("id"), h)
	}
	e.POST("/http-error/:id", func(c *echo.Context) error {
		enter(c)
		return echo.NewHTTPError(http.StatusConflict, "already ordered")
	}, lock)
	e.POST("/error/:id", func(c *echo.Context) error {
		enter(c)
		return errors.New("boom")
	}, lock)
	e.POST("/panic/:id", func(c *echo.Context) error {
		enter(c)
		panic("boom")
	}, lock)
	s := start(t, e)
	for _, c := range []struct {
		path   string
		status int
		body   string
	}{
		{"/http-error/1", http.StatusConflict, `{"message":"already ordered"}` + "\n"},
		{"/error/2", http.StatusInternalServerError, `{"message":"Internal Server Error"}` + "\n"},
		{"/panic/3", http.StatusInternalServerError, `{"message":"Internal Server Error"}` + "\n"},
	} {
		t.Run(c.path, func(t *testing.T) {
			r := s.do(ctx, "POST", c.path, "", "")
			if r.Err != nil || r.Status != c.status || r.Body != c.body {
				t.Fatalf("got %d %v %q, want %d %q", r.Status, r.Err, r.Body, c.status, c.body)
			}
			id := c.path[strings.LastIndexByte(c.path, '/')+1:]
			if h, _ := seen.take("handler " + id); h != "held" {
				t.Fatalf("in the handler the lock is %q, want held", h)
			}
			if h, _ := seen.take("error handler " + id); h != "free" {
				t.Fatalf("at the HTTPErrorHandler the lock is %q, want free (released first)", h)
			}
			key := "r:" + id
			lease, err := other.TryLock(ctx, key)
			if err != nil {
				t.Fatalf("another owner cannot take %s after the answer: %v", key, err)
			}
			if err := lease.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAnswersMatchHTTPLock: the default answers — 400 naming the part, 413,
// 429 with Retry-After, 503 — are byte for byte those of package httplock
// for the same request, even in an app whose HTTPErrorHandler writes
// something else for every error and whose JSONSerializer indents: the
// middleware writes them itself, so neither is involved.
func TestAnswersMatchHTTPLock(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	closed, err := core.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	ctx := locktest.Context(t)

	quiet := slog.New(slog.DiscardHandler)
	var appHandler atomic.Int32
	e := newEcho()
	e.JSONSerializer = indenting{}
	e.HTTPErrorHandler = func(c *echo.Context, err error) {
		appHandler.Add(1)
		c.String(http.StatusTeapot, "app error handler")
	}
	mux := http.NewServeMux()
	ok := func(c *echo.Context) error { return c.NoContent(http.StatusNoContent) }
	okHTTP := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	routes := []struct {
		path   string
		locker *core.Locker
		key    string
		max    int64
	}{
		{"/q", l, "q:{query.id:int}", 0},
		{"/b", l, "b:{body.user.id}", 64},
		{"/f", l, "f:{form.sku}", 0},
		{"/closed", closed, "c:{query.id}", 0},
	}
	for _, rt := range routes {
		e.POST(rt.path, ok, echolock.Must(echolock.NewWithConfig(echolock.Config{
			Locker: rt.locker, Key: rt.key, MaxBodySize: rt.max, Wait: core.NoWait, Logger: quiet})))
		mux.Handle("POST "+rt.path, httplock.Must(httplock.New(rt.locker, rt.key,
			httplock.WithMaxBodySize(rt.max), httplock.WithWait(core.NoWait), httplock.WithLogger(quiet)))(okHTTP))
	}
	es, hs := start(t, e), start(t, mux)

	busy, err := l.Lock(ctx, "q:7")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Unlock(context.Background())
	const jsonCT, formCT = "application/json", "application/x-www-form-urlencoded"
	for _, c := range []struct {
		name, path, ctype, body string
		status                  int
	}{
		{"missing query", "/q", "", "", 400},
		{"typed value does not parse", "/q?id=x", "", "", 400},
		{"missing query, ?pretty", "/q?pretty", "", "", 400},
		{"typed value with a newline", "/q?id=1%0A", "", "", 400},
		{"body not JSON", "/b", jsonCT, `{"user":`, 400},
		{"missing body field", "/b", jsonCT, `{"user":{}}`, 400},
		{"body over MaxBodySize", "/b", jsonCT, `{"user":{"id":1},"pad":"` + strings.Repeat("x", 64) + `"}`, 413},
		{"bad form", "/f", formCT, "sku=%zz", 400},
		{"busy", "/q?id=007", "", "", 429},
		{"Locker closed", "/closed?id=1", "", "", 503},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := es.do(ctx, "POST", c.path, c.ctype, c.body)
			want := hs.do(ctx, "POST", c.path, c.ctype, c.body)
			if want.Err != nil || want.Status != c.status {
				t.Fatalf("httplock answered %d %v %q, want %d", want.Status, want.Err, want.Body, c.status)
			}
			if got.Err != nil || got.Status != want.Status || got.Body != want.Body || got.RetryAfter != want.RetryAfter {
				t.Fatalf("echolock answered %d %q Retry-After %q (%v), httplock %d %q Retry-After %q",
					got.Status, got.Body, got.RetryAfter, got.Err, want.Status, want.Body, want.RetryAfter)
			}
			locktest.ErrorText(t, got.Body)
		})
	}
	if n := appHandler.Load(); n != 0 {
		t.Fatalf("the app's HTTPErrorHandler ran %d times for default answers", n)
	}
	t.Run("headers", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(ctx, "POST", es.URL+"/q", nil)
		resp, err := es.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if mt, p, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" || p["charset"] != "utf-8" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("headers %v", resp.Header)
		}
	})
}

// TestHandlersReturnHTTPError: BusyHandler and ErrorHandler may return an
// *echo.HTTPError instead of writing, and the app's HTTPErrorHandler then
// writes the answer with the status the middleware chose, Retry-After
// already set for 429 and the internal error kept for logging.
func TestHandlersReturnHTTPError(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	type seen struct {
		code     int
		internal error
	}
	var got notes[seen]
	e := newEcho()
	e.HTTPErrorHandler = func(c *echo.Context, err error) {
		code := echo.StatusCode(err)
		if code == 0 {
			got.put("app", seen{})
			c.NoContent(http.StatusInternalServerError)
			return
		}
		got.put("app", seen{code, errors.Unwrap(err)})
		c.String(code, "app: "+http.StatusText(code))
	}
	e.POST("/q", func(c *echo.Context) error { return c.NoContent(http.StatusNoContent) },
		echolock.Must(echolock.NewWithConfig(echolock.Config{
			Locker: l, Key: "q:{query.id}", Wait: core.NoWait,
			BusyHandler: func(c *echo.Context, err error) error {
				return echo.ErrTooManyRequests.Wrap(err)
			},
			ErrorHandler: func(c *echo.Context, status int, err error) error {
				return echo.NewHTTPError(status, "").Wrap(err)
			},
		})))
	s := start(t, e)
	busy, err := l.Lock(ctx, "q:7")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Unlock(context.Background())

	r := s.do(ctx, "POST", "/q", "", "")
	if sn, _ := got.take("app"); r.Status != 400 || r.Body != "app: Bad Request" || sn.code != 400 || !errors.Is(sn.internal, keyfunc.ErrMissing) {
		t.Fatalf("key error: %d %q, app handler saw %+v", r.Status, r.Body, sn)
	}
	r = s.do(ctx, "POST", "/q?id=7", "", "")
	if sn, _ := got.take("app"); r.Status != 429 || r.Body != "app: Too Many Requests" || r.RetryAfter == "" || sn.code != 429 || !errors.Is(sn.internal, core.ErrNotObtained) {
		t.Fatalf("busy: %d %q Retry-After %q, app handler saw %+v", r.Status, r.Body, r.RetryAfter, sn)
	}
}

// TestPathParamDecoded: Echo's default router hands c.Param a value still
// escaped when the path has escapes Go's default encoding would not write
// ("a%3Ab") and a decoded one otherwise ("a:b", "a b"); with
// echo.RouterConfig's UnescapePathParamValues or UseEscapedPathForMatching
// it hands them all on decoded. Under each router the key is built from
// the value decoded once, so both spellings of one value lock the same key
// — the key httplock builds for the same path — and the escape of an
// escape ("100%2525%3Ab") is not decoded twice. The routes have a second
// parameter and a wildcard after the one locked.
func TestPathParamDecoded(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	key := func(ctx context.Context) string {
		if lease := echolock.FromContext(ctx); lease != nil {
			return lease.Key()
		}
		return "no lease"
	}
	routes := []struct{ echo, mux, key string }{
		{"/v/:id", "/v/{id}", "v:{path.id}"},
		{"/n/:id", "/n/{id}", "n:{path.id:int}"},
		{"/m/:id/:o/s/*", "/m/{id}/{o}/s/{rest...}", "m:{path.id}"},
	}
	mux := http.NewServeMux()
	for _, rt := range routes {
		mux.Handle("POST "+rt.mux, httplock.Must(httplock.New(l, rt.key))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, key(r.Context()))
		})))
	}
	hs := start(t, mux)
	for name, rc := range map[string]*echo.RouterConfig{
		"default router":            nil,
		"UnescapePathParamValues":   {UnescapePathParamValues: true},
		"UseEscapedPathForMatching": {UseEscapedPathForMatching: true},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEcho()
			if rc != nil {
				e = echo.NewWithConfig(echo.Config{Router: echo.NewRouter(*rc), Logger: e.Logger})
				e.Use(middleware.Recover())
			}
			for _, rt := range routes {
				e.POST(rt.echo, func(c *echo.Context) error {
					return c.String(http.StatusOK, key(c.Request().Context()))
				}, echolock.Must(echolock.New(l, rt.key)))
			}
			es := start(t, e)
			for _, c := range []struct{ path, want string }{
				{"/v/a:b", "v:a%3Ab"},
				{"/v/a%3Ab", "v:a%3Ab"},
				{"/v/a%3ab", "v:a%3Ab"},
				{"/v/a%2Fb", "v:a/b"},
				{"/v/a%20b", "v:a b"},
				{"/v/100%25", "v:100%25"},
				{"/v/100%2525%3Ab", "v:100%2525%3Ab"},
				{"/v/%25zz", "v:%25zz"},
				{"/v/%2541", "v:%2541"},
				{"/v/caf%C3%A9", "v:café"},
				{"/n/%31", "n:1"},
				{"/n/007", "n:7"},
				{"/m/a%3Ab/c/s/x/y", "m:a%3Ab"},
				{"/m/a%253Ab/c%3A/s/x%2Fy", "m:a%253Ab"},
			} {
				got := es.do(ctx, "POST", c.path, "", "")
				want := hs.do(ctx, "POST", c.path, "", "")
				if got.Err != nil || got.Status != 200 || got.Body != c.want || want.Body != c.want {
					t.Errorf("%s: echolock %d %q (%v), httplock %q, want %q", c.path, got.Status, got.Body, got.Err, want.Body, c.want)
				}
			}
		})
	}
}

// TestLeaseInHandler: the handler's request context is the lease's Context
// (FromContext returns the lease, a nested Lock of the key re-enters),
// {ctx.user} reads what an auth middleware set with c.Set, and {ctx.tenant}
// a value in the request context; after the middleware, the middleware in
// front sees the request as it passed it on: its context live, no lease.
func TestLeaseInHandler(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	type seen struct {
		key             string
		fence           int64
		same, reentered bool
		after           string
		err             error
	}
	var got notes[seen]
	e := newEcho()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc { // an auth middleware
		return func(c *echo.Context) error {
			c.Set("user", 42)
			r := c.Request()
			c.SetRequest(r.WithContext(keyfunc.WithValue(r.Context(), "tenant", "acme")))
			err := next(c)
			s, _ := got.take("handler")
			after := c.Request().Context()
			s.after = fmt.Sprintf("err=%v lease=%v", after.Err(), echolock.FromContext(after) != nil)
			got.put("after", s)
			return err
		}
	})
	e.POST("/v/:voucher", func(c *echo.Context) error {
		ctx := c.Request().Context()
		lease := echolock.FromContext(ctx)
		s := seen{key: lease.Key(), fence: lease.Fence(), same: ctx == lease.Context()}
		inner, err := l.Lock(ctx, lease.Key(), core.WithWait(core.NoWait))
		if err == nil {
			s.reentered = inner.Reentrant()
			err = inner.Unlock(ctx)
		}
		s.err = err
		got.put("handler", s)
		return c.NoContent(http.StatusOK)
	}, echolock.Must(echolock.New(l, "order:{ctx.tenant}:{ctx.user}:{voucher}")))
	s := start(t, e)
	if r := s.do(locktest.Context(t), "POST", "/v/a:b", "", ""); r.Err != nil || r.Status != 200 {
		t.Fatalf("status %d %v %s", r.Status, r.Err, r.Body)
	}
	sn, _ := got.take("after")
	if sn.key != "order:acme:42:a%3Ab" || sn.fence <= 0 || !sn.same || !sn.reentered || sn.err != nil || sn.after != "err=<nil> lease=false" {
		t.Fatalf("handler saw %+v", sn)
	}
}

// TestBodyReplayed: a key read from the body leaves it whole for the
// handler: the JSON bytes as sent, and c.FormValue for urlencoded and
// multipart forms.
func TestBodyReplayed(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	e := newEcho()
	e.POST("/json", func(c *echo.Context) error {
		b, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return err
		}
		return c.String(http.StatusOK, echolock.FromContext(c.Request().Context()).Key()+"|"+string(b))
	}, echolock.Must(echolock.New(l, "j:{body.user.id:int}")))
	e.POST("/form", func(c *echo.Context) error {
		return c.String(http.StatusOK, echolock.FromContext(c.Request().Context()).Key()+"|"+c.FormValue("sku")+"|"+c.FormValue("n"))
	}, echolock.Must(echolock.New(l, "f:{sku}")))
	s := start(t, e)

	body := `{"user": {"id": 42, "name": "Zoë"}, "qty": 1.50}`
	if r := s.do(ctx, "POST", "/json", "application/json", body); r.Status != 200 || r.Body != "j:42|"+body {
		t.Errorf("JSON: %d %v %q", r.Status, r.Err, r.Body)
	}
	form := url.Values{"sku": {"a:b"}, "n": {"3"}}.Encode()
	if r := s.do(ctx, "POST", "/form", "application/x-www-form-urlencoded", form); r.Status != 200 || r.Body != "f:a%3Ab|a:b|3" {
		t.Errorf("urlencoded form: %d %v %q", r.Status, r.Err, r.Body)
	}
	var mp bytes.Buffer
	w := multipart.NewWriter(&mp)
	w.WriteField("sku", "x1")
	w.WriteField("n", "5")
	w.Close()
	if r := s.do(ctx, "POST", "/form", w.FormDataContentType(), mp.String()); r.Status != 200 || r.Body != "f:x1|x1|5" {
		t.Errorf("multipart form: %d %v %q", r.Status, r.Err, r.Body)
	}
	rc := srv.Client(t)
	for _, k := range []string{"j:42", "f:a%3Ab", "f:x1"} {
		if h := held(ctx, rc, k); h != "free" {
			t.Errorf("lock %s is %s after the requests, want free", k, h)
		}
	}
}

// TestBodyLimitInFront: a body over the bound of Echo's BodyLimit
// middleware in front, sent without a Content-Length (so that BodyLimit
// cannot answer before reading), is a 413 when the key reads it, as one
// over MaxBodySize is, not a 400; the control under both bounds is served.
func TestBodyLimitInFront(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	e := newEcho()
	e.Use(middleware.BodyLimit(64))
	var ran atomic.Int32
	e.POST("/b", func(c *echo.Context) error { ran.Add(1); return c.NoContent(http.StatusNoContent) },
		echolock.Must(echolock.New(l, "b:{body.id}")))
	s := start(t, e)
	send := func(body string) locktest.Result {
		// A reader of unknown length: sent chunked, no Content-Length.
		req, err := http.NewRequestWithContext(ctx, "POST", s.URL+"/b", io.MultiReader(strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.client.Do(req)
		if err != nil {
			return locktest.Result{Err: err}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return locktest.Result{Status: resp.StatusCode, Body: string(b)}
	}
	if r := send(`{"id":1}`); r.Err != nil || r.Status != http.StatusNoContent {
		t.Fatalf("control: %d %v %q", r.Status, r.Err, r.Body)
	}
	r := send(`{"id":1,"pad":"` + strings.Repeat("x", 128) + `"}`)
	if r.Err != nil || r.Status != http.StatusRequestEntityTooLarge || locktest.ErrorText(t, r.Body) != "request body too large" {
		t.Fatalf("over BodyLimit: %d %v %q, want 413", r.Status, r.Err, r.Body)
	}
	if ran.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1 (the control)", ran.Load())
	}
}
