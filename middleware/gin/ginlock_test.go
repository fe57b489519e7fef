package ginlock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/keyfunc"
	"github.com/lockgate/lockgate/middleware/gin"
	"github.com/lockgate/lockgate/redistest"
)

// TestContextWithFallback: Gin's context trap, both ways. The lease always
// travels in c.Request.Context() (FromContext of it, FromGin and a nested
// Lock with it re-enters). The *gin.Context c itself carries it only when
// the engine sets ContextWithFallback: without it FromContext(c) is nil, a
// nested Lock with c is another owner (busy, not re-entered), and c is
// not cancelled when the lock is lost; with it, all three follow the
// lease.
func TestContextWithFallback(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextWithFallback=%v", fallback), func(t *testing.T) {
			srv := redistest.Start(t)
			l, _ := locktest.NewLocker(t, srv)
			rc := srv.Client(t)
			type seen struct {
				lease                bool // FromGin(c) is a lease
				fromRequest, fromC   bool // FromContext(c.Request.Context()), FromContext(c) is that lease
				cNil                 bool // FromContext(c) is nil
				requestReenters      bool
				cReenters            bool
				cErr                 error // the nested Lock with c
				doneSame             bool  // c.Done() is the lease's Done
				lostCause, cErrAfter error // after the lock was lost: the request context's cause, c.Err()
			}
			got := make(chan seen, 1)
			e := newEngine()
			e.ContextWithFallback = fallback
			e.POST("/v/:voucher", ginlock.Must(ginlock.New(l, "order:{path.voucher}", ginlock.WithTTL(300*time.Millisecond))), func(c *gin.Context) {
				var s seen
				defer func() { got <- s }()
				lease := ginlock.FromGin(c)
				if lease == nil {
					return
				}
				rctx := c.Request.Context()
				s.lease = true
				s.fromRequest = ginlock.FromContext(rctx) == lease
				s.fromC = ginlock.FromContext(c) == lease
				s.cNil = ginlock.FromContext(c) == nil
				if inner, err := l.Lock(rctx, lease.Key(), core.WithWait(core.NoWait)); err == nil {
					s.requestReenters = inner.Reentrant()
					inner.Unlock(rctx)
				}
				inner, err := l.Lock(c, lease.Key(), core.WithWait(core.NoWait))
				if err == nil {
					s.cReenters = inner.Reentrant()
					inner.Unlock(c)
				}
				s.cErr = err
				s.doneSame = c.Done() == lease.Context().Done()
				// Lose the lock behind the holder's back: the request
				// context is cancelled with ErrLockLost at the next renewal.
				if err := rc.Del(rctx, locktest.RedisKey(lease.Key())).Err(); err != nil {
					return
				}
				timer := time.NewTimer(10 * time.Second)
				defer timer.Stop()
				select {
				case <-rctx.Done():
				case <-timer.C:
				}
				s.lostCause = context.Cause(rctx)
				s.cErrAfter = c.Err()
			})
			srvURL := serve(t, e)
			if r := srvURL.do(locktest.Context(t), "POST", "/v/7", "", ""); r.Err != nil || r.Status != http.StatusOK {
				t.Fatalf("status %d %v %s", r.Status, r.Err, r.Body)
			}
			s := <-got
			if !s.lease || !s.fromRequest || !s.requestReenters {
				t.Fatalf("c.Request.Context() does not carry the lease: %+v", s)
			}
			if !errors.Is(s.lostCause, core.ErrLockLost) {
				t.Fatalf("request context's cause after the loss %v, want ErrLockLost", s.lostCause)
			}
			if !fallback {
				if !s.cNil || s.fromC || s.cReenters || !errors.Is(s.cErr, core.ErrNotObtained) || s.doneSame || s.cErrAfter != nil {
					t.Fatalf("without ContextWithFallback c must carry nothing of the lease: %+v", s)
				}
				return
			}
			if !s.fromC || !s.cReenters || s.cErr != nil || !s.doneSame || !errors.Is(s.cErrAfter, context.Canceled) {
				t.Fatalf("with ContextWithFallback c must follow the lease: %+v", s)
			}
		})
	}
}

// TestSkip: WithSkip skips the middleware: no key (a missing one is no
// 400), no lock (one held elsewhere is no 429), FromGin nil. The control:
// the same requests without the skip header are answered 400 and 429.
func TestSkip(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	held, err := l.Lock(ctx, "x:1")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	e := newEngine()
	e.POST("/x", ginlock.Must(ginlock.New(l, "x:{query.id}",
		ginlock.WithWait(core.NoWait),
		ginlock.WithSkip(func(c *gin.Context) bool { return c.GetHeader("X-Skip") != "" }))),
		func(c *gin.Context) {
			c.String(http.StatusOK, "lease=%v", ginlock.FromGin(c) != nil)
		})
	s := serve(t, e)
	do := func(path string, skip bool) locktest.Result {
		req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+path, nil)
		if skip {
			req.Header.Set("X-Skip", "1")
		}
		resp, err := s.client.Do(req)
		if err != nil {
			return locktest.Result{Err: err}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return locktest.Result{Status: resp.StatusCode, Body: string(b)}
	}
	for _, c := range []struct {
		path   string
		skip   bool
		status int
		body   string
	}{
		{"/x", true, 200, "lease=false"},
		{"/x?id=1", true, 200, "lease=false"},
		{"/x?id=2", true, 200, "lease=false"},
		{"/x", false, 400, `{"error":"query.id: missing or empty value"}`},
		{"/x?id=1", false, 429, `{"error":"resource is busy, retry later"}`},
		{"/x?id=2", false, 200, "lease=true"},
	} {
		if r := do(c.path, c.skip); r.Err != nil || r.Status != c.status || r.Body != c.body {
			t.Errorf("%s skip=%v: %d %v %q, want %d %q", c.path, c.skip, r.Status, r.Err, r.Body, c.status, c.body)
		}
	}
}

// TestAnswersAbortChain: every answer aborts the chain, also a replacement
// busy or error handler that only writes, or even calls c.Next(): none of
// the handlers after the middleware runs without the lock. Retry-After is
// set before the busy handler runs, and both replacements see the chain
// already aborted.
func TestAnswersAbortChain(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	// Held with a 1s lease: a Locker that has released nothing yet hints the
	// holder's TTL, so Retry-After is 1.
	held, err := l.Lock(ctx, "x:1", core.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	var ran atomic.Int32
	count := func(c *gin.Context) { ran.Add(1) }
	final := func(c *gin.Context) { ran.Add(1); c.Status(http.StatusOK) }
	busy := func(c *gin.Context) {
		c.String(http.StatusTooManyRequests, "busy aborted=%v retry=%s", c.IsAborted(), c.Writer.Header().Get("Retry-After"))
		c.Next()
	}
	onErr := func(c *gin.Context, status int, err error) {
		c.String(status, "error aborted=%v", c.IsAborted())
		c.Next()
	}
	e := newEngine()
	custom := ginlock.Must(ginlock.New(l, "x:{query.id}", ginlock.WithWait(core.NoWait), ginlock.WithMaxBodySize(8),
		ginlock.WithBusyHandler(busy), ginlock.WithErrorHandler(onErr)))
	plain := ginlock.Must(ginlock.New(l, "x:{query.id}", ginlock.WithWait(core.NoWait)))
	e.POST("/custom", custom, count, final)
	e.POST("/custom-body", ginlock.Must(ginlock.New(l, "x:{body.id}", ginlock.WithMaxBodySize(8), ginlock.WithErrorHandler(onErr))), count, final)
	e.POST("/plain", plain, count, final)
	s := serve(t, e)
	for _, c := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"/custom?id=1", "", 429, "busy aborted=true retry=1"},
		{"/custom", "", 400, "error aborted=true"},
		{"/custom-body", `{"id": 1, "pad": "xxxxxxxx"}`, 413, "error aborted=true"},
		{"/custom-body", `{"id": `, 400, "error aborted=true"},
		{"/plain?id=1", "", 429, `{"error":"resource is busy, retry later"}`},
		{"/plain", "", 400, `{"error":"query.id: missing or empty value"}`},
	} {
		r := s.do(ctx, "POST", c.path, "application/json", c.body)
		if r.Err != nil || r.Status != c.status || r.Body != c.want {
			t.Errorf("%s: %d %v %q, want %d %q", c.path, r.Status, r.Err, r.Body, c.status, c.want)
		}
		if c.status == 429 && r.RetryAfter == "" {
			t.Errorf("%s: 429 without Retry-After", c.path)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("handlers after the middleware ran %d times without the lock", n)
	}
	// The control: a free key runs both handlers.
	if r := s.do(ctx, "POST", "/custom?id=2", "", ""); r.Status != 200 || ran.Load() != 2 {
		t.Fatalf("free key: %d %v, handlers ran %d times, want 200 and 2", r.Status, r.Err, ran.Load())
	}
}

// TestReleasedBeforeOuterMiddleware: when the chain returns or panics, the
// lock is already released and the middleware in front sees its own
// c.Request again (live context, no lease), so it can neither hold the
// lock longer nor find a cancelled context.
func TestReleasedBeforeOuterMiddleware(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	rc := srv.Client(t)
	type seen struct {
		sameRequest, live, noLease, released bool
	}
	got := make(chan seen, 1)
	e := newEngine()
	e.Use(func(c *gin.Context) {
		before := c.Request
		var s seen
		defer func() { // also while a panic unwinds to gin.Recovery
			s.sameRequest = c.Request == before
			s.live = c.Request.Context().Err() == nil
			s.noLease = ginlock.FromGin(c) == nil
			n, err := rc.Exists(c.Request.Context(), locktest.RedisKey("r:"+c.Param("id"))).Result()
			s.released = err == nil && n == 0
			got <- s
		}()
		c.Next()
	})
	e.POST("/r/:id", ginlock.Must(ginlock.New(l, "r:{path.id}")), func(c *gin.Context) {
		n, err := rc.Exists(c.Request.Context(), locktest.RedisKey("r:"+c.Param("id"))).Result()
		if err != nil || n != 1 {
			c.Status(http.StatusInternalServerError)
			return
		}
		if c.Query("panic") != "" {
			panic("boom")
		}
		c.Status(http.StatusOK)
	})
	s := serve(t, e)
	ctx := locktest.Context(t)
	for _, c := range []struct {
		path   string
		status int
	}{{"/r/1", 200}, {"/r/2?panic=1", 500}} {
		r := s.do(ctx, "POST", c.path, "", "")
		if r.Err != nil || r.Status != c.status {
			t.Fatalf("%s: %d %v %s, want %d", c.path, r.Status, r.Err, r.Body, c.status)
		}
		if v := <-got; !v.sameRequest || !v.live || !v.noLease || !v.released {
			t.Fatalf("%s: the middleware in front saw %+v", c.path, v)
		}
	}
}

// TestBodyForGin: a key read from the body leaves it whole for Gin's own
// readers: ShouldBindJSON, c.PostForm of an urlencoded and a multipart
// form (with its file), c.GetRawData. Bad bodies are answered before any
// of them runs.
func TestBodyForGin(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	var ran atomic.Int32
	e := newEngine()
	e.POST("/json", ginlock.Must(ginlock.New(l, "o:{body.user.id:int}", ginlock.WithMaxBodySize(256))), func(c *gin.Context) {
		ran.Add(1)
		var v struct {
			User struct {
				ID   int    `json:"id"`
				Name string `json:"name"`
			} `json:"user"`
		}
		if err := c.ShouldBindJSON(&v); err != nil {
			c.String(http.StatusUnprocessableEntity, "bind: %v", err)
			return
		}
		c.String(http.StatusOK, "%s %d %s", ginlock.FromGin(c).Key(), v.User.ID, v.User.Name)
	})
	e.POST("/form", ginlock.Must(ginlock.New(l, "sku:{form.sku}")), func(c *gin.Context) {
		ran.Add(1)
		out := ginlock.FromGin(c).Key() + " " + c.PostForm("sku") + "|" + c.PostForm("n")
		if fh, err := c.FormFile("file"); err == nil {
			f, _ := fh.Open()
			b, _ := io.ReadAll(f)
			f.Close()
			out += "|" + string(b)
		}
		c.String(http.StatusOK, "%s", out)
	})
	e.POST("/raw", ginlock.Must(ginlock.New(l, "{body.id}")), func(c *gin.Context) {
		ran.Add(1)
		b, err := c.GetRawData()
		if err != nil {
			c.Status(http.StatusInternalServerError)
			return
		}
		c.Data(http.StatusOK, "application/octet-stream", b)
	})
	s := serve(t, e)
	ctx := locktest.Context(t)

	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	mw.WriteField("sku", "a:b")
	mw.WriteField("n", "3")
	fw, _ := mw.CreateFormFile("file", "f.txt")
	fw.Write([]byte("file-content"))
	mw.Close()

	const rawBody = `{"id": "k", "x": [1, 2, 3]}`
	for _, c := range []struct {
		name, path, ctype, body string
		status                  int
		want                    string
	}{
		{"json number", "/json", "application/json", `{"user": {"id": 7, "name": "Zoë"}}`, 200, "o:7 7 Zoë"},
		{"urlencoded", "/form", "application/x-www-form-urlencoded", url.Values{"sku": {"a:b"}, "n": {"3"}}.Encode(), 200, "sku:a%3Ab a:b|3"},
		{"multipart", "/form", mw.FormDataContentType(), mp.String(), 200, "sku:a%3Ab a:b|3|file-content"},
		{"raw", "/raw", "application/json", rawBody, 200, rawBody},
	} {
		r := s.do(ctx, "POST", c.path, c.ctype, c.body)
		if r.Err != nil || r.Status != c.status || (c.want != "" && r.Body != c.want) {
			t.Errorf("%s: %d %v %q, want %d %q", c.name, r.Status, r.Err, r.Body, c.status, c.want)
		}
	}
	before := ran.Load()
	for _, c := range []struct {
		name, path, ctype, body string
		status                  int
		part                    string
	}{
		{"body over the bound", "/json", "application/json", `{"user": {"id": 1}, "pad": "` + strings.Repeat("x", 300) + `"}`, 413, "too large"},
		{"body not JSON", "/json", "application/json", `{"user":`, 400, "body.user.id"},
		{"typed value", "/json", "application/json", `{"user": {"id": "x"}}`, 400, "body.user.id"},
		{"bad multipart", "/form", "multipart/form-data; boundary=zz", "--zz\r\nbroken", 400, "form.sku"},
		{"missing form field", "/form", "application/x-www-form-urlencoded", "n=1", 400, "form.sku"},
	} {
		r := s.do(ctx, "POST", c.path, c.ctype, c.body)
		if r.Err != nil || r.Status != c.status {
			t.Errorf("%s: %d %v %q, want %d", c.name, r.Status, r.Err, r.Body, c.status)
			continue
		}
		if msg := locktest.ErrorText(t, r.Body); !strings.Contains(msg, c.part) {
			t.Errorf("%s: error %q does not name %q", c.name, msg, c.part)
		}
	}
	if n := ran.Load() - before; n != 0 {
		t.Fatalf("handler ran %d times on bad bodies", n)
	}
}

// TestContextValues: {ctx.name} reads what earlier middleware stored with
// c.Set (strings, integers, Stringers), else the request context
// (keyfunc.WithValue); a c.Set value of another type is not used; and
// WithContextValue replaces the lookup. The middleware also works mounted
// on a route group with Use, reading the group's path parameters.
func TestContextValues(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	key := func(c *gin.Context) { c.String(http.StatusOK, "%s", ginlock.FromGin(c).Key()) }
	e := newEngine()
	g := e.Group("/g/:voucher", func(c *gin.Context) { // an auth middleware
		switch c.GetHeader("X-Auth") {
		case "int":
			c.Set("user", 42)
		case "string":
			c.Set("user", "u-9")
		case "stringer":
			c.Set("user", time.Duration(1500)*time.Millisecond)
		case "other":
			c.Set("user", struct{ ID int }{1})
		case "request":
			c.Request = c.Request.WithContext(keyfunc.WithValue(c.Request.Context(), "user", int64(77)))
		case "both": // c.Set's value is the one read
			c.Request = c.Request.WithContext(keyfunc.WithValue(c.Request.Context(), "user", int64(77)))
			c.Set("user", "u-9")
		}
	}, ginlock.Must(ginlock.New(l, "order:{ctx.user}:{path.voucher}")))
	g.POST("/order", key)
	e.POST("/custom", ginlock.Must(ginlock.New(l, "t:{ctx.tenant}", ginlock.WithContextValue(func(c *gin.Context, name string) (string, bool) {
		v := c.GetHeader("X-" + name)
		return v, v != ""
	}))), key)
	s := serve(t, e)
	ctx := locktest.Context(t)
	for _, c := range []struct {
		auth, path string
		header     string
		status     int
		want       string
	}{
		{"int", "/g/7/order", "", 200, "order:42:7"},
		{"string", "/g/7/order", "", 200, "order:u-9:7"},
		{"stringer", "/g/7/order", "", 200, "order:1.5s:7"},
		{"request", "/g/7/order", "", 200, "order:77:7"},
		{"both", "/g/7/order", "", 200, "order:u-9:7"},
		{"other", "/g/7/order", "", 400, `{"error":"ctx.user: missing or empty value"}`},
		{"", "/g/7/order", "", 400, `{"error":"ctx.user: missing or empty value"}`},
		{"", "/custom", "acme", 200, "t:acme"},
	} {
		req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+c.path, nil)
		req.Header.Set("X-Auth", c.auth)
		if c.header != "" {
			req.Header.Set("X-tenant", c.header)
		}
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || string(b) != c.want {
			t.Errorf("auth %q %s: %d %q, want %d %q", c.auth, c.path, resp.StatusCode, b, c.status, c.want)
		}
	}
}

// TestFromGinOutsideLock: FromGin is nil for a nil context, a context
// without a request and a route without the middleware.
func TestFromGinOutsideLock(t *testing.T) {
	if ginlock.FromGin(nil) != nil {
		t.Fatal("FromGin(nil) is not nil")
	}
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	if ginlock.FromGin(c) != nil {
		t.Fatal("FromGin of a context without a request is not nil")
	}
	c.Request, _ = http.NewRequest("GET", "/", nil)
	if ginlock.FromGin(c) != nil || ginlock.FromContext(c.Request.Context()) != nil {
		t.Fatal("a request without the middleware has a lease")
	}
}
