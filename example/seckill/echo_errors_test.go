package seckill

import (
	"net/http"
	"testing"
)

// TestEchoV5ErrorsAsV4: the errors Echo itself returns — no route (404),
// a method the route does not have (405), also to HEAD — are answered by
// the echov5 stack as by the echo (v4) stack: the same status, body and
// Content-Type. In v5 they are status errors rather than *echo.HTTPError,
// which echoV5Error reads with echo.StatusCode.
func TestEchoV5ErrorsAsV4(t *testing.T) {
	cfg := Config{Service: &Service{Store: openStore(t, "")}, Mode: LockNone}
	v4, v5 := serveHTTP(t, cfg, StackEcho), serveHTTP(t, cfg, StackEchoV5)
	type answer struct {
		status      int
		ctype, body string
	}
	answerOf := func(method, url string) answer {
		resp, b := roundTrip(t, method, url, nil)
		return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
	}
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/nope", http.StatusNotFound},
		{"DELETE", "/healthz", http.StatusMethodNotAllowed},
		{"HEAD", "/nope", http.StatusNotFound},
		{"GET", "/healthz", http.StatusOK}, // the control: a route both serve
	} {
		want, got := answerOf(c.method, v4+c.path), answerOf(c.method, v5+c.path)
		if want.status != c.status || got != want {
			t.Errorf("%s %s: echov5 %+v, echo %+v, want status %d", c.method, c.path, got, want, c.status)
		}
	}
}
