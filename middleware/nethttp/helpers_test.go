package httplock_test

import (
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// gauge records how many handlers are inside at once (shared helper).
type gauge struct{ *locktest.Gauge }

func newGauge() *gauge { return &gauge{locktest.NewGauge()} }

// handler enters the gauge and works for up to work, or until another
// request is inside at the same time (so a control that overlaps ends fast,
// and one that never overlaps works for the full time).
func (g *gauge) handler(work time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.Enter()
		defer g.Exit()
		t := time.NewTimer(work)
		defer t.Stop()
		select {
		case <-g.Overlap():
		case <-t.C:
		}
		w.WriteHeader(http.StatusOK)
	})
}

// newLocker returns a Locker with its own client to srv.
func newLocker(t testing.TB, srv *redistest.Server, opts ...core.Option) *core.Locker {
	t.Helper()
	return locktest.Locker(t, srv.Client(t), opts...)
}

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
