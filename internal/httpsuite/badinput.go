package httpsuite

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

const jsonCT = "application/json"

// badInput: every key error answers 400 naming the part (and the reason,
// never the package), a body over the bound 413, as {"error": "..."} JSON;
// the handler does not run and Redis holds no key. Then valid requests show
// the JSON and form bodies intact for the handler (the middleware read
// them to build the key).
func badInput(t *testing.T, s Stack) {
	e := newEnv(t, s)
	l := e.locker()
	var ran atomic.Int32
	echoBody := func(_ context.Context, _ *core.Lease, r Request) (int, string) {
		ran.Add(1)
		return http.StatusOK, string(r.Body)
	}
	echoForm := func(_ context.Context, _ *core.Lease, r Request) (int, string) {
		ran.Add(1)
		return http.StatusOK, r.Form("sku") + "|" + r.Form("n")
	}
	base := e.serve(
		Route{Method: "POST", Path: seckillPath, Locker: l, Key: seckillKey, Handler: echoBody},
		Route{Method: "POST", Path: "/body", Locker: l, Key: "order:{body.user.id}", Options: Options{MaxBodySize: 1024}, Handler: echoBody},
		Route{Method: "POST", Path: "/form", Locker: l, Key: "sku:{form.sku}", Handler: echoForm},
		Route{Method: "POST", Path: "/header", Locker: l, Key: "u:{header.X-User-ID}", Handler: echoBody},
	)
	bad := []struct {
		name, path, ctype, body string
		status                  int
		part, reason            string
	}{
		{"missing query", "/seckill/7", "", "", 400, "query.user_id", "missing"},
		{"empty query", "/seckill/7?user_id=", "", "", 400, "query.user_id", "missing"},
		{"oversized value", "/seckill/7?user_id=" + strings.Repeat("9", keyfunc.DefaultMaxValueLen+1), "", "", 400, "query.user_id", "too long"},
		{"control character in query", "/seckill/7?user_id=a%0Ab", "", "", 400, "query.user_id", "invalid value"},
		{"control character in path", "/seckill/a%01b?user_id=1", "", "", 400, "path.voucher", "invalid value"},
		{"missing body field", "/body", jsonCT, `{"user":{}}`, 400, "body.user.id", "missing"},
		{"body not JSON", "/body", jsonCT, `{"user":`, 400, "body.user.id", "invalid value"},
		{"body field an object", "/body", jsonCT, `{"user":{"id":{}}}`, 400, "body.user.id", "invalid value"},
		{"oversized body", "/body", jsonCT, `{"user":{"id":1},"pad":"` + strings.Repeat("x", 2048) + `"}`, 413, "", "too large"},
		{"missing form field", "/form", "application/x-www-form-urlencoded", "n=1", 400, "form.sku", "missing"},
		{"missing header", "/header", "", "", 400, "header.X-User-ID", "missing"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", base+c.path, c.ctype, c.body)
			if r.Err != nil || r.Status != c.status {
				t.Fatalf("status %d (%v), want %d: %s", r.Status, r.Err, c.status, r.Body)
			}
			if !strings.HasPrefix(r.ContentType, jsonCT) {
				t.Errorf("Content-Type %q, want %s", r.ContentType, jsonCT)
			}
			msg := errorText(t, r)
			if !strings.Contains(msg, c.part) || !strings.Contains(msg, c.reason) {
				t.Fatalf("error %q, want it to name %q and %q", msg, c.part, c.reason)
			}
			for _, pkg := range []string{"keyfunc", "lockgate", "httplock", "fiberlock", "ginlock", "echolock"} {
				if strings.Contains(msg, pkg) {
					t.Fatalf("error %q carries a package name (%s)", msg, pkg)
				}
			}
		})
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("handler ran %d times on bad input", n)
	}
	if n, err := e.rdb.DBSize(e.ctx).Result(); err != nil || n != 0 {
		t.Fatalf("redis holds %d keys after bad input (%v), want 0", n, err)
	}

	t.Run("JSON body intact", func(t *testing.T) {
		body := `{"user": {"id": 42, "name": "Zoë"}, "qty": 1.50}`
		if r := e.do("POST", base+"/body", jsonCT, body); r.Err != nil || r.Status != 200 || r.Body != body {
			t.Fatalf("got %d %v %q, want the body echoed", r.Status, r.Err, r.Body)
		}
	})
	t.Run("form body intact", func(t *testing.T) {
		form := url.Values{"sku": {"a:b"}, "n": {"3"}}.Encode()
		if r := e.do("POST", base+"/form", "application/x-www-form-urlencoded", form); r.Err != nil || r.Status != 200 || r.Body != "a:b|3" {
			t.Fatalf("got %d %v %q, want a:b|3", r.Status, r.Err, r.Body)
		}
	})
}
