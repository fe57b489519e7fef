package echolock_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"

	"github.com/lockgate/lockgate/internal/locktest"
)

// newEcho returns an Echo with Recover in front, as a real service has it,
// and no log output.
func newEcho() *echo.Echo {
	e := echo.New()
	e.Logger = slog.New(slog.DiscardHandler)
	e.Use(middleware.Recover())
	return e
}

// server is e served on a loopback port.
type server struct {
	URL    string
	client *http.Client
}

// start serves h (an *echo.Echo, or a mux for comparison) with httptest,
// its error log kept out of the test output, closed at cleanup.
func start(t testing.TB, h http.Handler) *server {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.Start()
	t.Cleanup(ts.Close)
	return &server{URL: ts.URL, client: ts.Client()}
}

func (s *server) do(ctx context.Context, method, path, ctype, body string) locktest.Result {
	return locktest.Do(ctx, s.client, method, s.URL+path, ctype, body)
}

// notes passes what handlers saw to the test: a handler puts a note before
// it answers, the test takes it after the answer, so a missing note is a
// failure of the test, never a hang.
type notes[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

func (n *notes[T]) put(k string, v T) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]T{}
	}
	n.m[k] = v
}

func (n *notes[T]) take(k string) (T, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.m[k]
	delete(n.m, k)
	return v, ok
}

// indenting is a JSONSerializer that indents every answer, as an app may
// configure its own.
type indenting struct{}

func (indenting) Serialize(c *echo.Context, v any, _ string) error {
	enc := json.NewEncoder(c.Response())
	enc.SetIndent("", "    ")
	return enc.Encode(v)
}

func (indenting) Deserialize(c *echo.Context, v any) error {
	return json.NewDecoder(c.Request().Body).Decode(v)
}
