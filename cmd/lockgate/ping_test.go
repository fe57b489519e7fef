package main

import (
	"strings"
	"testing"

	"github.com/lockgate/lockgate/redistest"
)

// lockgate ping: "ok" and what it reached from a healthy server and a
// 3-master Cluster; a
// server that refuses connections fails (exit 1) naming its address and
// the refusal.
func TestPing(t *testing.T) {
	srv := redistest.Start(t)
	if r, want := mustRun(t, "-addr", srv.Addr, "ping"), "ok: server "+srv.Addr+"\n"; r.stdout != want {
		t.Fatalf("ping of a healthy server printed %q, want %q", r.stdout, want)
	}
	cl := redistest.StartCluster(t, 3)
	if r, want := mustRun(t, "-cluster", cl.Servers[0].Addr, "ping"), "ok: Cluster of 3 masters (seeds "+cl.Servers[0].Addr+")\n"; r.stdout != want {
		t.Fatalf("ping of a healthy Cluster printed %q, want %q", r.stdout, want)
	}
	down := redistest.Start(t)
	down.Stop()
	r := lockgate(t, "-addr", down.Addr, "ping")
	if r.code != exitFailed || !strings.Contains(r.stderr, down.Addr) || !strings.Contains(r.stderr, "refused") {
		t.Fatalf("ping of a stopped server: exit %d, stderr %q; want exit %d naming %s and the refusal", r.code, r.stderr, exitFailed, down.Addr)
	}
	if r := lockgate(t, "-addr", srv.Addr, "ping", "extra"); r.code != exitUsage {
		t.Fatalf("ping with an argument: exit %d, want %d", r.code, exitUsage)
	}
}
