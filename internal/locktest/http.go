package locktest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Result is one HTTP exchange as the adapters' tests look at it.
type Result struct {
	Status     int
	RetryAfter string // the Retry-After header
	Body       string
	Err        error // the request failed (no response)
	// ContentType is the Content-Type header.
	ContentType string
}

// Do sends one request with client and reads the whole answer.
func Do(ctx context.Context, client *http.Client, method, url, ctype, body string) Result {
	return Send(ctx, client, method, url, nil, ctype, body)
}

// ErrorText decodes an adapter's {"error": "..."} answer, failing the test
// if body is not one.
func ErrorText(t testing.TB, body string) string {
	t.Helper()
	var v struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Error == "" {
		t.Fatalf("body %q is not {\"error\": ...}: %v", body, err)
	}
	return v.Error
}

// Context bounds a test's requests (60s), cancelled at cleanup.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// SyncBuffer is a log destination safe for concurrent writes.
type SyncBuffer struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{} // closed by the next Write, for Wait
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

// Wait returns the text written so far as soon as match accepts it
// (checked now and after every Write), or the text and ctx's error when
// ctx ends first.
func (s *SyncBuffer) Wait(ctx context.Context, match func(text string) bool) (string, error) {
	for {
		// The text and the channel of the next Write are read together;
		// match runs outside the lock.
		s.mu.Lock()
		text := s.b.String()
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		if match(text) {
			return text, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return text, ctx.Err()
		}
	}
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Send is Do with request headers (header may be nil).
func Send(ctx context.Context, client *http.Client, method, url string, header http.Header, ctype, body string) Result {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return Result{Err: err}
	}
	for k, vs := range header {
		req.Header[k] = append([]string(nil), vs...)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Result{Err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Result{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"), Body: string(b), ContentType: resp.Header.Get("Content-Type")}
}
