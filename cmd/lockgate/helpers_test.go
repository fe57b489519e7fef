package main

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/redis/go-redis/v9"
)

// result is what one run of the command did.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// lockgate runs the command in-process with args, and logs what it did
// (with the passwords in args masked).
func lockgate(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	start := time.Now()
	code := run(context.Background(), args, &out, &errOut)
	r := result{code: code, stdout: out.String(), stderr: errOut.String(), took: time.Since(start)}
	t.Logf("lockgate %s → exit %d\n%s%s", strings.Join(redactArgs(args), " "), r.code, r.stdout, r.stderr)
	return r
}

// mustRun runs the command and fails t unless it exits 0.
func mustRun(t *testing.T, args ...string) result {
	t.Helper()
	r := lockgate(t, args...)
	if r.code != 0 {
		t.Fatalf("lockgate %q: exit %d, stderr %q", redactArgs(args), r.code, r.stderr)
	}
	return r
}

// rows parses the command's table: the cells of each row by KEY, the
// header checked, the "(N locks...)" footer returned apart.
func rows(t *testing.T, out string) (map[string][]string, []string, string) {
	t.Helper()
	byKey := map[string][]string{}
	var order []string
	var footer string
	header := false
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case strings.HasPrefix(line, "("):
			footer = line
		case !header:
			if got := strings.Join(f, " "); got != strings.Join(columns, " ") {
				t.Fatalf("header %q, want %q", got, strings.Join(columns, " "))
			}
			header = true
		case len(f) == len(columns):
			byKey[f[0]] = f
			order = append(order, f[0])
		default:
			t.Fatalf("row %q has %d cells, want %d", line, len(f), len(columns))
		}
	}
	return byKey, order, footer
}

// newLocker returns a Locker on client, closed at the end of the test.
func newLocker(t *testing.T, client redis.UniversalClient, opts ...core.Option) *core.Locker {
	t.Helper()
	return locktest.Locker(t, client, append([]core.Option{core.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
}

// take locks key with l and unlocks it at the end of the test (an error
// there is expected when the test released the lock by force).
func take(t *testing.T, l *core.Locker, key string, opts ...core.LockOption) *core.Lease {
	t.Helper()
	lease, err := l.TryLock(context.Background(), key, opts...)
	if err != nil {
		t.Fatalf("TryLock %s: %v", key, err)
	}
	t.Cleanup(func() { lease.Unlock(context.Background()) })
	return lease
}

// inspectNow is l.Inspect with a short deadline, failing t on error.
func inspectNow(t *testing.T, l *core.Locker, key string) core.LockInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := l.Inspect(ctx, key)
	if err != nil {
		t.Fatalf("Inspect %s: %v", key, err)
	}
	return info
}

// waiter is a Lock call queued for a held lock, in a goroutine.
type waiter struct {
	done   chan struct{}
	lease  *core.Lease
	err    error
	cancel context.CancelFunc
}

// queue starts l.Lock(key) with a long wait and returns once it has joined
// the lock's queue: ev, the Locker's observer, sees its EventWaiting (its
// first attempt wrote the queue entry). The waiter's context is
// cancelled, its lease unlocked, at the end of the test.
func queue(t *testing.T, l *core.Locker, ev *locktest.Events, key string) *waiter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &waiter{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(w.done)
		w.lease, w.err = l.Lock(ctx, key, core.WithWait(30*time.Second))
	}()
	t.Cleanup(func() {
		cancel()
		<-w.done
		w.lease.Unlock(context.Background())
	})
	wctx, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	waiting := make(chan bool, 1)
	go func() { _, ok := ev.Wait(wctx, locktest.Is(core.EventWaiting, key)); waiting <- ok }()
	select {
	case ok := <-waiting:
		if !ok {
			t.Fatalf("Lock %s did not join the queue within 5s", key)
		}
	case <-w.done:
		t.Fatalf("Lock %s returned before queuing: %v", key, w.err)
	}
	return w
}

// granted waits for the waiter's Lock to return and fails t unless it
// returned a lease.
func (w *waiter) granted(t *testing.T) *core.Lease {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock within 10s")
	}
	if w.err != nil {
		t.Fatalf("the waiter's Lock: %v", w.err)
	}
	return w.lease
}

// redisClient returns a client with opts, closed at the end of the test.
func redisClient(t *testing.T, opts *redis.Options) *redis.Client {
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// renewals waits (at most 5s) until ev has seen n successful renewals of
// key.
func renewals(t *testing.T, ev *locktest.Events, key string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	seen := 0
	if _, ok := ev.Wait(ctx, func(e core.Event) bool {
		if e.Kind == core.EventRenewed && e.Key == key && e.Err == nil {
			seen++
		}
		return seen >= n
	}); !ok {
		t.Fatalf("%d renewals of %s within 5s, want %d", seen, key, n)
	}
}

// redactArgs returns args as the tests show them: URLs (an argument with
// "://" or '@') through redactURL, the value of -password masked.
func redactArgs(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		switch {
		case strings.Contains(a, "://"), strings.Contains(a, "@"):
			out[i] = redactURL(a)
		case strings.HasPrefix(strings.TrimLeft(a, "-"), "password="):
			out[i] = a[:strings.Index(a, "=")+1] + "xxxxx"
		case i > 0 && strings.TrimLeft(args[i-1], "-") == "password":
			out[i] = "xxxxx"
		}
	}
	return out
}
