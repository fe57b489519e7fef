package main

import (
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/redistest"
)

// TestUnavailableServer: against a server that was stopped (connection
// refused), every command that talks to Redis exits 1 with an
// "unavailable" message on stderr, well within its -timeout.
func TestUnavailableServer(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	for _, args := range [][]string{
		{"inspect", "order:1"},
		{"ls"},
		{"release", "order:1", "--force"},
	} {
		r := lockgate(t, append([]string{"-addr", srv.Addr, "-timeout", "500ms"}, args...)...)
		checkUnavailable(t, r, time.Second)
	}
}

// TestHungServerBoundedByTimeout: a server that accepts connections but
// answers nothing (SIGSTOP) makes the command fail with exit 1 at its
// -timeout, not hang: the deadline covers the whole command.
func TestHungServerBoundedByTimeout(t *testing.T) {
	srv := redistest.Start(t)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	for _, args := range [][]string{
		{"inspect", "order:1"},
		{"ls"},
		{"release", "order:1", "--force"},
	} {
		r := lockgate(t, append([]string{"-addr", srv.Addr, "-timeout", "300ms"}, args...)...)
		checkUnavailable(t, r, 2*time.Second)
		if r.took < 250*time.Millisecond {
			t.Errorf("%q failed after %v, before its -timeout of 300ms: not a timeout", args, r.took)
		}
		if !strings.Contains(r.stderr, "-timeout 300ms") {
			t.Errorf("stderr %q does not name the -timeout", r.stderr)
		}
	}
}

func checkUnavailable(t *testing.T, r result, within time.Duration) {
	t.Helper()
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	if !strings.Contains(r.stderr, "unavailable") {
		t.Errorf("stderr %q does not say unavailable", r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
	if r.took > within {
		t.Errorf("took %v, want under %v", r.took, within)
	}
}
