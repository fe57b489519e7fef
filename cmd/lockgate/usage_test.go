package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/redistest"
)

// TestUsageErrors: every wrong invocation exits 2 with a message naming
// the problem on stderr and nothing on stdout. -addr points at a port
// where nothing listens: none of them may need Redis.
func TestUsageErrors(t *testing.T) {
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"inspect"}, "missing KEY"},
		{[]string{"inspect", "a", "b"}, "one KEY expected"},
		{[]string{"inspect", "-x", "a"}, "-x"},
		{[]string{"inspect", strings.Repeat("k", 1025)}, "over the limit"},
		{[]string{"release"}, "missing KEY"},
		{[]string{"release", "--force"}, "missing KEY"},
		{[]string{"release", "a"}, "--force"},
		{[]string{"release", "a", "b", "--force"}, "one KEY expected"},
		{[]string{"ls", "a:*", "b:*"}, "one PATTERN expected"},
		{[]string{"ls", "-limit", "0"}, "-limit 0"},
		{[]string{"ls", "-limit", "x"}, "invalid value"},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"-nope", "ls"}, "-nope"},
		{[]string{"-timeout", "0s", "ls"}, "-timeout"},
		{[]string{"-cluster", addr, "-sentinel", addr, "-master", "m", "ls"}, "exclude each other"},
		{[]string{"-cluster", addr, "-db", "1", "ls"}, "-db"},
		{[]string{"-cluster", ",", "ls"}, "no address"},
		{[]string{"-sentinel", addr, "ls"}, "-master"},
		{[]string{"-master", "m", "ls"}, "-sentinel"},
		{[]string{"-prefix", "a{b", "ls"}, "brace"},
	} {
		args := append([]string{"-addr", addr}, tc.args...)
		if strings.HasPrefix(strings.Join(tc.args, " "), "-cluster") || strings.HasPrefix(strings.Join(tc.args, " "), "-sentinel") {
			args = tc.args // -addr excludes them
		}
		r := lockgate(t, args...)
		if r.code != 2 {
			t.Errorf("%q: exit %d, want 2", tc.args, r.code)
		}
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: stderr %q does not contain %q", tc.args, r.stderr, tc.want)
		}
		if r.stdout != "" {
			t.Errorf("%q: stdout %q, want nothing", tc.args, r.stdout)
		}
	}
	r := lockgate(t, "-addr", addr, "-cluster", addr, "ls")
	if r.code != 2 || !strings.Contains(r.stderr, "-addr is for a single server") {
		t.Errorf("-addr with -cluster: exit %d %q, want 2", r.code, r.stderr)
	}
}

// TestHelp: -h, help and each command's help exit 0 and print to stdout
// the text that documents every command, release as the last resort.
func TestHelp(t *testing.T) {
	full := []string{"inspect KEY", "ls [-limit N] [PATTERN]", "release KEY --force", "help [COMMAND]",
		"-addr", "-cluster", "-sentinel", "-master", "-password", "-db", "-prefix", "-timeout",
		"-url", "rediss://", "-tls", "-tls-ca-file", "-tls-insecure-skip-verify", "for tests and self-signed certificates only",
		"-tls-server-name", "-user", "-sentinel-user", "show in ps", "see it in ps",
		"LOCKGATE_REDIS_PASSWORD", "REDISCLI_AUTH", "LOCKGATE_SENTINEL_PASSWORD",
		"LAST RESORT", "keeps running until its next renewal notices", "known to be gone",
		"limit reached", "Exit status"}
	for _, args := range [][]string{{"-h"}, {"-help"}, {"help"}} {
		r := lockgate(t, args...)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("%q: exit %d stderr %q, want 0 and nothing", args, r.code, r.stderr)
		}
		for _, want := range full {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%q does not document %q", args, want)
			}
		}
	}
	for _, args := range [][]string{{"help", "release"}, {"release", "-h"}, {"release", "KEY", "--help"}} {
		r := lockgate(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "release KEY --force") || !strings.Contains(r.stdout, "LAST RESORT") || strings.Contains(r.stdout, "ls [-limit N]") {
			t.Errorf("%q: exit %d, stdout %q: want release's help only", args, r.code, r.stdout)
		}
	}
}
