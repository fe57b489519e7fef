package lockhttp_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/internal/lockhttp"
	"github.com/lockgate/lockgate/keyfunc"
)

// ReadBody answers 413 for a body over the bound — also one that a bound
// set in front (http.MaxBytesReader) cut off, which reads as a plain error
// without the check — and 400 for a body that fails to read; a body read
// whole is replayed to the handler intact and its fields are found.
func TestReadBody(t *testing.T) {
	body := `{"user":{"id":42}}`
	for _, tc := range []struct {
		name   string
		req    func() *http.Request
		max    int64
		status int
	}{
		{"within the bound", func() *http.Request { return post(body) }, 1024, 0},
		{"over the bound", func() *http.Request { return post(body) }, 4, http.StatusRequestEntityTooLarge},
		{"cut off by a bound in front", func() *http.Request {
			r := post(body)
			r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, 4)
			return r
		}, 1024, http.StatusRequestEntityTooLarge},
		{"read error", func() *http.Request {
			r := post(body)
			r.Body = io.NopCloser(failing{})
			return r
		}, 1024, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req()
			q := lockhttp.Request[struct{}]{R: r, MaxBody: tc.max}
			status, err := q.ReadBody()
			if status != tc.status || (status == 0) != (err == nil) {
				t.Fatalf("ReadBody = %d, %v; want %d", status, err, tc.status)
			}
			if status != 0 {
				return
			}
			if v, ok, err := q.Lookup(keyfunc.SourceBody, "user.id"); v != "42" || !ok || err != nil {
				t.Errorf("body lookup = %q %v %v", v, ok, err)
			}
			if b, _ := io.ReadAll(r.Body); string(b) != body {
				t.Errorf("the handler reads %q, want the body intact", b)
			}
		})
	}
}

// Form fields come from the buffered body (urlencoded or multipart), and
// the path and ctx sources from the adapter's functions.
func TestLookupSources(t *testing.T) {
	r := httptest.NewRequest("POST", "/x?q=1", strings.NewReader("sku=a%3Ab&n=2"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("X-User", "u7")
	q := lockhttp.Request[struct{}]{R: r, MaxBody: 1024,
		Path: func(_ struct{}, name string) string { return "p-" + name },
		Ctx:  func(_ struct{}, name string) (string, bool) { return "c-" + name, true }}
	if _, err := q.ReadBody(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src        keyfunc.Source
		name, want string
	}{
		{keyfunc.SourceForm, "sku", "a:b"},
		{keyfunc.SourceQuery, "q", "1"},
		{keyfunc.SourceHeader, "X-User", "u7"},
		{keyfunc.SourcePath, "voucher", "p-voucher"},
		{keyfunc.SourceCtx, "user", "c-user"},
	} {
		if v, ok, err := q.Lookup(c.src, c.name); v != c.want || !ok || err != nil {
			t.Errorf("%v %s = %q %v %v, want %q", c.src, c.name, v, ok, err, c.want)
		}
	}
	bad := lockhttp.Request[struct{}]{R: httptest.NewRequest("POST", "/", strings.NewReader("%zz")), MaxBody: 1024}
	bad.R.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	bad.ReadBody()
	if _, _, err := bad.Lookup(keyfunc.SourceForm, "sku"); !errors.Is(err, keyfunc.ErrInvalidValue) {
		t.Errorf("a malformed form = %v, want ErrInvalidValue", err)
	}
}

func post(body string) *http.Request {
	r := httptest.NewRequest("POST", "/", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("connection reset") }
