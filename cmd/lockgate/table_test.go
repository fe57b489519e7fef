package main

import (
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
)

// TestTraceColumn: the TRACE column shows a W3C traceparent's trace id,
// any other tag as it is (quoted when it would break the table), "-" for
// none.
func TestTraceColumn(t *testing.T) {
	for _, tc := range []struct{ tag, want string }{
		{"", "-"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "4bf92f3577b34da6a3ce929d0e0e4736"},
		// a later version may append fields
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "4bf92f3577b34da6a3ce929d0e0e4736"},
		// not traceparents: shown raw
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736x00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736x00f067aa0ba902b7-01"},
		{"worker-7", "worker-7"},
		{"a\tb", `"a\tb"`},
	} {
		if got := trace(tc.tag); got != tc.want {
			t.Errorf("trace(%q) = %q, want %q", tc.tag, got, tc.want)
		}
	}
}

// TestRowCells: a held lock's cells, rounded durations; a free one's
// dashes; one that readers hold, their count and TTL; a key with a newline
// quoted so the row stays one line.
func TestRowCells(t *testing.T) {
	held := core.LockInfo{Key: "order:1", Held: true, TTL: 29712345 * time.Microsecond, Fence: 1731340800123456, Age: 90*time.Minute + 1500*time.Millisecond, Waiters: 2}
	if got, want := strings.Join(cells(held), " "), "order:1 yes 29.712s 1731340800123456 1h30m2s 2 -"; got != want {
		t.Errorf("held: %q, want %q", got, want)
	}
	read := core.LockInfo{Key: "voucher:7", TTL: 12345 * time.Millisecond, Waiters: 1, Readers: 3}
	if got, want := strings.Join(cells(read), " "), "voucher:7 read (3) 12.345s - - 1 -"; got != want {
		t.Errorf("read: %q, want %q", got, want)
	}
	free := core.LockInfo{Key: "a\nb", Waiters: 1}
	if got, want := strings.Join(cells(free), " "), `"a\nb" no - - - 1 -`; got != want {
		t.Errorf("free: %q, want %q", got, want)
	}
}
