package httplock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
	l := core.New(srv.Client(t), opts...)
	t.Cleanup(func() { l.Close() })
	return l
}

// serve starts an httptest.Server for h whose error log is kept in buf.
func serve(t testing.TB, h http.Handler) (*httptest.Server, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ErrorLog = log.New(buf, "", 0)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts, buf
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type result struct {
	status     int
	retryAfter string
	body       string
	err        error
}

func do(ctx context.Context, c *http.Client, method, url, ctype, body string) result {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(b)}
}

// errorText decodes {"error": "..."}.
func errorText(t *testing.T, body string) string {
	t.Helper()
	var v struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Error == "" {
		t.Fatalf("body %q is not {\"error\": ...}: %v", body, err)
	}
	return v.Error
}

// testCtx bounds a test's requests.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
