package httplock_test

import (
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/lockgate/lockgate/internal/locktest"
)

// serve starts an httptest.Server for h whose error log is kept in buf.
func serve(t testing.TB, h http.Handler) (*httptest.Server, *locktest.SyncBuffer) {
	t.Helper()
	buf := &locktest.SyncBuffer{}
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ErrorLog = log.New(buf, "", 0)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts, buf
}
