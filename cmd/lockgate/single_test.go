package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// holderTraceparent is the holder tag of the tests' holders, as the otel
// module's tag function writes it.
const (
	holderTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceIDHex        = "4bf92f3577b34da6a3ce929d0e0e4736"
)

func holderTag(context.Context) string { return holderTraceparent }

// TestInspectShowsHolderAndWaiter: a lock held by another process's Locker
// with a traceparent tag and one caller queued for it shows as held, with
// the lease's fence, a TTL within the lease's, one waiter and the trace id;
// a lock no one took shows as free with "-" but for its waiters.
func TestInspectShowsHolderAndWaiter(t *testing.T) {
	srv := redistest.Start(t)
	holder := newLocker(t, srv.Client(t), core.WithHolderTag(holderTag))
	var ev locktest.Events
	other := newLocker(t, srv.Client(t), core.WithObserver(&ev))
	lease := take(t, holder, "order:42", core.WithTTL(10*time.Second))
	queue(t, other, &ev, "order:42")

	r := mustRun(t, "-addr", srv.Addr, "inspect", "order:42")
	got, _, _ := rows(t, r.stdout)
	row, ok := got["order:42"]
	if !ok || len(got) != 1 {
		t.Fatalf("want one row for order:42, got %q", r.stdout)
	}
	want := map[string]string{"HELD": "yes", "FENCE": strconv.FormatInt(lease.Fence(), 10), "WAITERS": "1", "TRACE": traceIDHex}
	checkCells(t, row, want)
	ttl, err := time.ParseDuration(row[2])
	if err != nil || ttl <= 0 || ttl > 10*time.Second {
		t.Errorf("TTL %q: want a duration in (0, 10s] (err %v)", row[2], err)
	}
	if age, err := time.ParseDuration(row[4]); err != nil || age < 0 || age > time.Minute {
		t.Errorf("AGE %q: want a duration in [0, 1m] (err %v)", row[4], err)
	}

	r = mustRun(t, "-addr", srv.Addr, "inspect", "order:43")
	got, _, _ = rows(t, r.stdout)
	checkCells(t, got["order:43"], map[string]string{"KEY": "order:43", "HELD": "no", "TTL": "-", "FENCE": "-", "AGE": "-", "WAITERS": "0", "TRACE": "-"})
}

// checkCells compares the named cells of a row.
func checkCells(t *testing.T, row []string, want map[string]string) {
	t.Helper()
	if len(row) != len(columns) {
		t.Fatalf("row %q: want %d cells", row, len(columns))
	}
	for i, col := range columns {
		if w, ok := want[col]; ok && row[i] != w {
			t.Errorf("%s = %q, want %q (row %q)", col, row[i], w, row)
		}
	}
}

// TestListMatchesPattern: with order:1, order:2 and other:1 held, ls
// order:* lists exactly the two order locks, sorted, whichever side of the
// pattern -limit is on; ls without a pattern lists all three; -limit 3
// shows them all, -limit 2 two and "limit reached"; a pattern that matches
// nothing prints only the count.
func TestListMatchesPattern(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv.Client(t))
	fences := map[string]int64{}
	for _, key := range []string{"order:2", "other:1", "order:1"} {
		fences[key] = take(t, l, key).Fence()
	}

	for _, args := range [][]string{{"ls", "order:*"}, {"ls", "-limit", "10", "order:*"}, {"ls", "order:*", "-limit", "10"}} {
		r := mustRun(t, append([]string{"-addr", srv.Addr}, args...)...)
		got, order, footer := rows(t, r.stdout)
		if strings.Join(order, " ") != "order:1 order:2" {
			t.Errorf("%q listed %q, want order:1 order:2 in that order", args, order)
		}
		for _, key := range order {
			checkCells(t, got[key], map[string]string{"HELD": "yes", "FENCE": strconv.FormatInt(fences[key], 10)})
		}
		if footer != "(2 locks)" {
			t.Errorf("%q footer %q, want (2 locks)", args, footer)
		}
	}

	r := mustRun(t, "-addr", srv.Addr, "ls")
	if _, order, footer := rows(t, r.stdout); strings.Join(order, " ") != "order:1 order:2 other:1" || footer != "(3 locks)" {
		t.Errorf("ls listed %q %q, want the 3 locks", order, footer)
	}
	// The limit: exactly reached is not cut; one short is.
	r = mustRun(t, "-addr", srv.Addr, "ls", "-limit", "3")
	if _, order, footer := rows(t, r.stdout); len(order) != 3 || footer != "(3 locks)" {
		t.Errorf("ls -limit 3 listed %q %q, want the 3 locks, not cut", order, footer)
	}
	r = mustRun(t, "-addr", srv.Addr, "ls", "-limit", "2")
	if _, order, footer := rows(t, r.stdout); len(order) != 2 || footer != "(2 locks; limit reached)" {
		t.Errorf("ls -limit 2 listed %q %q, want 2 and limit reached", order, footer)
	}
	r = mustRun(t, "-addr", srv.Addr, "ls", "nothing:*")
	if r.stdout != "(0 locks)\n" {
		t.Errorf("ls nothing:* printed %q, want only (0 locks)", r.stdout)
	}
}

// TestListSelectsPrefixAndDB: -prefix and -db select the Lockers' keys:
// a lock taken with another prefix in database 3 is seen only with both.
func TestListSelectsPrefixAndDB(t *testing.T) {
	srv := redistest.Start(t)
	opts := srv.Options()
	opts.DB = 3
	client := redisClient(t, opts)
	l := newLocker(t, client, core.WithPrefix("app:"))
	lease := take(t, l, "job:1")

	for _, args := range [][]string{
		{"-addr", srv.Addr, "ls"},
		{"-addr", srv.Addr, "-db", "3", "ls"},
		{"-addr", srv.Addr, "-prefix", "app:", "ls"},
	} {
		if r := mustRun(t, args...); r.stdout != "(0 locks)\n" {
			t.Errorf("%q printed %q, want (0 locks)", args, r.stdout)
		}
	}
	r := mustRun(t, "-addr", srv.Addr, "-db", "3", "-prefix", "app:", "ls")
	got, _, footer := rows(t, r.stdout)
	checkCells(t, got["job:1"], map[string]string{"HELD": "yes", "FENCE": strconv.FormatInt(lease.Fence(), 10)})
	if footer != "(1 lock)" {
		t.Errorf("footer %q, want (1 lock)", footer)
	}
}

// TestReleaseWithoutForceRefuses: release without --force exits 2, says
// why (last resort, --force) and leaves the lock to its holder: the
// control of the next test.
func TestReleaseWithoutForceRefuses(t *testing.T) {
	srv := redistest.Start(t)
	var ev locktest.Events
	l := newLocker(t, srv.Client(t), core.WithObserver(&ev))
	lease := take(t, l, "order:42", core.WithTTL(time.Second))

	r := lockgate(t, "-addr", srv.Addr, "release", "order:42")
	if r.code != 2 {
		t.Fatalf("exit %d, want 2", r.code)
	}
	for _, want := range []string{"--force", "last resort"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q does not mention %q", r.stderr, want)
		}
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
	// Past two renewals (TTL 1s: every ~333ms) the holder still holds it.
	renewals(t, &ev, "order:42", 2)
	if info := inspectNow(t, l, "order:42"); !info.Held || info.Fence != lease.Fence() {
		t.Fatalf("after the refused release: %+v, want held with fence %d", info, lease.Fence())
	}
	select {
	case <-lease.Done():
		t.Fatalf("the holder's lease ended: %v", context.Cause(lease.Context()))
	default:
	}
}

// TestForceReleaseHandsLockToWaiter: release KEY --force removes the hold,
// prints it (fence included) and "released"; the queued waiter gets the
// lock with a higher fence, and the old holder's lease is cancelled with
// ErrLockLost at its next renewal.
func TestForceReleaseHandsLockToWaiter(t *testing.T) {
	srv := redistest.Start(t)
	holder := newLocker(t, srv.Client(t), core.WithHolderTag(holderTag))
	var ev locktest.Events
	other := newLocker(t, srv.Client(t), core.WithObserver(&ev))
	lease := take(t, holder, "order:42", core.WithTTL(time.Second))
	w := queue(t, other, &ev, "order:42")

	r := mustRun(t, "-addr", srv.Addr, "release", "order:42", "--force")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 3 || lines[2] != "released" {
		t.Fatalf("stdout %q: want the header, the removed row and released", r.stdout)
	}
	f := strings.Fields(lines[1])
	if len(f) != 1+len(columns) || f[0] != "removing:" {
		t.Fatalf("row %q: want removing: and %d cells", lines[1], len(columns))
	}
	checkCells(t, f[1:], map[string]string{"KEY": "order:42", "HELD": "yes", "FENCE": strconv.FormatInt(lease.Fence(), 10), "WAITERS": "1", "TRACE": traceIDHex})

	next := w.granted(t)
	if next.Fence() <= lease.Fence() {
		t.Errorf("the waiter's fence %d is not above the removed one %d", next.Fence(), lease.Fence())
	}
	select {
	case <-lease.Done():
		if cause := context.Cause(lease.Context()); !errors.Is(cause, core.ErrLockLost) {
			t.Errorf("the old holder's lease ended with %v, want ErrLockLost", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the old holder's lease was not cancelled within 5s (its renewals are every ~333ms)")
	}
	if info := inspectNow(t, other, "order:42"); !info.Held || info.Fence != next.Fence() {
		t.Errorf("after the handoff: %+v, want held by the waiter with fence %d", info, next.Fence())
	}
}

// TestForceReleaseFreesLock: with no one waiting, release -force (the
// single-dash spelling, before KEY) leaves the lock free, so anyone can
// take it; a second release finds nothing and says so, exit 0.
func TestForceReleaseFreesLock(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv.Client(t))
	lease := take(t, l, "order:7", core.WithTTL(time.Second))

	r := mustRun(t, "-addr", srv.Addr, "release", "-force", "order:7")
	if !strings.Contains(r.stdout, "removing:") || !strings.Contains(r.stdout, strconv.FormatInt(lease.Fence(), 10)) || !strings.HasSuffix(r.stdout, "\nreleased\n") {
		t.Errorf("stdout %q: want the removed row with fence %d and released", r.stdout, lease.Fence())
	}
	if info := inspectNow(t, l, "order:7"); info.Held {
		t.Fatalf("after the release: %+v, want free", info)
	}
	select {
	case <-lease.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the holder's lease was not cancelled within 5s")
	}

	r = mustRun(t, "-addr", srv.Addr, "release", "order:7", "--force")
	if strings.Contains(r.stdout, "removing:") || !strings.HasSuffix(r.stdout, "\nnothing held\n") {
		t.Errorf("second release printed %q, want the free row and nothing held", r.stdout)
	}
	again := take(t, l, "order:7")
	if again.Fence() <= lease.Fence() {
		t.Errorf("fence %d after the release is not above %d", again.Fence(), lease.Fence())
	}
}
