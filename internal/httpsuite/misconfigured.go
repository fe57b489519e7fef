package httpsuite

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/internal/locktest"
)

// unfillablePlaceholder: a key template naming a path parameter its route
// does not have (a typo, {path.vouchr} on /typo/{voucher}) is the server's
// error: every request is answered 500 "internal server error", the
// handler does not run, and one error line (not one per request) names
// the template and the route. Controls: the same route with the right
// name is served (200), and a present but malformed value stays the
// client's 400.
func unfillablePlaceholder(t *testing.T, s Stack) {
	e := newEnv(t, s)
	l := e.locker()
	var logBuf locktest.SyncBuffer
	logger := textLogger(&logBuf)
	c := &counter{}
	const typo, good = "order:{path.vouchr:int}", "order:{path.voucher:int}"
	base := e.serve(
		Route{Method: "POST", Path: "/typo/{voucher}", Locker: l, Key: typo, Options: Options{Logger: logger}, Handler: c.handler},
		Route{Method: "POST", Path: "/good/{voucher}", Locker: l, Key: good, Options: Options{Logger: logger}, Handler: c.handler},
	)
	for range 3 {
		r := e.post(base + "/typo/7")
		if r.Err != nil || r.Status != http.StatusInternalServerError {
			t.Fatalf("unfillable placeholder: %d %v %s, want 500", r.Status, r.Err, r.Body)
		}
		if msg := errorText(t, r); msg != "internal server error" {
			t.Fatalf("500 text %q, want \"internal server error\"", msg)
		}
	}
	if c.n() != 0 {
		t.Fatal("the handler ran without its lock")
	}
	var lines []string
	for _, ln := range strings.Split(logBuf.String(), "\n") {
		if strings.Contains(ln, "path parameter") {
			lines = append(lines, ln)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d log lines for the unfillable placeholder, want 1 (once per route): %q", len(lines), logBuf.String())
	}
	if ln := lines[0]; !strings.Contains(ln, "level=ERROR") || !strings.Contains(ln, typo) || !strings.Contains(ln, "voucher") || !strings.Contains(ln, "route=") {
		t.Fatalf("log line %q, want an error naming the template and the route", ln)
	}
	if r := e.post(base + "/good/7"); r.Err != nil || r.Status != http.StatusOK {
		t.Fatalf("control, the right name: %d %v %s, want 200", r.Status, r.Err, r.Body)
	}
	r := e.post(base + "/good/x")
	if r.Err != nil || r.Status != http.StatusBadRequest {
		t.Fatalf("control, a malformed value: %d %v %s, want 400", r.Status, r.Err, r.Body)
	}
	if msg := errorText(t, r); !strings.HasPrefix(msg, "path.voucher: invalid value") {
		t.Fatalf("400 text %q", msg)
	}
}
