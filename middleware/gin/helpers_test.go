package ginlock_test

import (
	"context"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/lockgate/lockgate/internal/locktest"
)

// newEngine returns a Gin engine with gin.Recovery in front, as a real
// service has it.
func newEngine() *gin.Engine {
	e := gin.New()
	e.Use(gin.Recovery())
	return e
}

// server is an engine served on a loopback port by net/http.
type server struct {
	URL    string
	client *http.Client
}

// serve starts an httptest.Server for h (its error log kept out of the
// test output), closed at cleanup.
func serve(t testing.TB, h http.Handler) *server {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ErrorLog = log.New(&locktest.SyncBuffer{}, "", 0)
	ts.Start()
	t.Cleanup(ts.Close)
	return &server{URL: ts.URL, client: ts.Client()}
}

func (s *server) do(ctx context.Context, method, path, ctype, body string) locktest.Result {
	return locktest.Do(ctx, s.client, method, s.URL+path, ctype, body)
}
