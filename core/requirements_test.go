package core_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
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

// An eviction policy that can evict a held lock is warned about once, in
// the log and to the Observer. Control: noeviction (the default) gives no
// warning.
func TestServerRequirements(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		args   []string
		policy string
	}{
		{"volatile-ttl", []string{"--maxmemory", "64mb", "--maxmemory-policy", "volatile-ttl"}, "volatile-ttl"},
		{"control: noeviction", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t, tc.args...)
			var log syncBuffer
			var mu sync.Mutex
			var warnings []error
			obs := core.ObserverFunc(func(_ context.Context, e core.Event) {
				if e.Kind == core.EventWarning {
					mu.Lock()
					warnings = append(warnings, e.Err)
					mu.Unlock()
				}
			})
			l := locktest.Locker(t, srv.Client(t), core.WithLogger(slog.New(slog.NewTextHandler(&log, nil))), core.WithObserver(obs))
			ctx := locktest.Context(t)
			for i := 0; i < 3; i++ {
				s, err := l.Lock(ctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				s.Unlock(ctx)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.policy == "" {
				if len(warnings) != 0 || log.String() != "" {
					t.Fatalf("warnings %v, log %q for noeviction", warnings, log.String())
				}
				return
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0].Error(), tc.policy) {
				t.Fatalf("observer warnings %v, want one naming %s", warnings, tc.policy)
			}
			if n := strings.Count(log.String(), "maxmemory-policy"); n != 1 || !strings.Contains(log.String(), "level=WARN") {
				t.Fatalf("log %q: want one warning", log.String())
			}
		})
	}
}

// Over maxmemory (noeviction) a new lock fails as unavailable, while a lock
// already held keeps being renewed and is released: the renew and release
// scripts run with allow-oom. The probe: a plain write is refused with OOM.
func TestHeldLockAtMaxmemory(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--maxmemory-policy", "noeviction")
	l, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	s, err := l.Lock(ctx, "k", core.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// Memory over the limit: a limit below what the server already uses.
	used, err := direct.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	var bytesUsed int64
	for _, line := range strings.Split(used, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			bytesUsed, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if err := direct.ConfigSet(ctx, "maxmemory", strconv.FormatInt(bytesUsed/2, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.ConfigSet(context.Background(), "maxmemory", "0") })
	if err := direct.Set(ctx, "probe", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("probe: a plain SET over maxmemory = %v, want OOM", err)
	}
	if _, err := l.TryLock(ctx, "new"); !errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("new lock over maxmemory = %v, want ErrUnavailable (OOM)", err)
	}
	// Longer than the TTL: only renewals keep it.
	select {
	case <-s.Done():
		t.Fatalf("lease lost over maxmemory: %v", context.Cause(s.Context()))
	case <-time.After(time.Second):
	}
	if err := s.Unlock(ctx); err != nil {
		t.Fatalf("Unlock over maxmemory = %v", err)
	}
	if n := direct.Exists(ctx, "lockgate:{k}").Val(); n != 0 {
		t.Fatal("the lock is still held after Unlock over maxmemory")
	}
}
