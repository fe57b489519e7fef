package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/redistest"
)

// urlPassword is the password of the URLs below: no output may hold it.
const urlPassword = "pw-Zq7xK3"

// TestURLUsageErrors: a -url that cannot be used, or TLS, user and URL
// flags that contradict each other, exit 2 naming the problem, without
// dialling and without the password in the output: a URL lockgate's
// url.Parse cannot read is shown with its user info masked and without
// url.Parse's reason (which may quote the password).
func TestURLUsageErrors(t *testing.T) {
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	u := "redis://alice:" + urlPassword + "@" + addr
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-url", u, "-addr", addr}, "-url names a single server"},
		{[]string{"-url", u, "-cluster", addr}, "-url names a single server"},
		{[]string{"-url", u, "-sentinel", addr, "-master", "m"}, "-url names a single server"},
		{[]string{"-url", "http://alice:" + urlPassword + "@" + addr}, `the scheme is "http"`},
		{[]string{"-url", "unix://alice:" + urlPassword + "@/tmp/redis.sock"}, `the scheme is "unix"`},
		{[]string{"-url", "alice:" + urlPassword + "@" + addr}, "-url xxxxx@" + addr + `: the scheme is "alice"`},
		{[]string{"-url", u + "/x"}, "invalid database number"},
		{[]string{"-url", u + "/0/1"}, "invalid URL path"},
		{[]string{"-url", u + "/-1"}, "database -1 is negative"},
		{[]string{"-url", u + "?dial_timeout=3s"}, `query parameter "dial_timeout"`},
		{[]string{"-url", u + "?password=" + urlPassword}, `query parameter "password"`},
		{[]string{"-url", u + "?skip_verify=true"}, "skip_verify is for rediss://"},
		{[]string{"-url", "rediss://alice:" + urlPassword + "@" + addr + "?skip_verify=maybe"}, "invalid skip_verify"},
		// A '/' not percent-encoded ends the host: url.Parse would quote
		// part of the password as a port.
		{[]string{"-url", "redis://alice:pw-Zq/7xK3@" + addr}, "redis://xxxxx@" + addr + ": not a valid URL"},
		{[]string{"-url", "redis://alice:pw-Zq%zz7xK3@" + addr}, "not a valid URL"},
		{[]string{"-url", "redis://" + addr + ":x"}, "not a valid URL: invalid port"},
		{[]string{"-url", u, "-tls-ca-file", "ca.pem"}, "-tls-ca-file needs TLS"},
		{[]string{"-addr", addr, "-tls-insecure-skip-verify"}, "-tls-insecure-skip-verify needs TLS"},
		{[]string{"-addr", addr, "-tls-server-name", "redis.example"}, "-tls-server-name needs TLS"},
		{[]string{"-addr", addr, "-tls", "-tls-ca-file", "ca.pem", "-tls-insecure-skip-verify"}, "exclude each other"},
		{[]string{"-url", "rediss://" + addr + "?skip_verify=true", "-tls-ca-file", "ca.pem"}, "exclude each other"},
		{[]string{"-addr", addr, "-sentinel-user", "s"}, "-sentinel-user is for Sentinel"},
	} {
		r := lockgate(t, append(tc.args, "ping")...)
		if r.code != exitUsage {
			t.Errorf("%q: exit %d, want %d", redactArgs(tc.args), r.code, exitUsage)
		}
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: stderr %q does not contain %q", redactArgs(tc.args), r.stderr, tc.want)
		}
		if r.stdout != "" {
			t.Errorf("%q: stdout %q, want nothing", redactArgs(tc.args), r.stdout)
		}
		for _, secret := range []string{urlPassword, "Zq/7x", "Zq%zz", "7xK3"} {
			if strings.Contains(r.stderr, secret) {
				t.Errorf("%q: stderr %q holds (part of) the password", redactArgs(tc.args), r.stderr)
			}
		}
	}
}

// TestRedactURL: the password never survives; the rest of the URL does.
func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://alice:secret@h:1/2", "redis://alice:xxxxx@h:1/2"},
		{"rediss://:secret@h:1", "rediss://:xxxxx@h:1"},
		{"redis://h:1/0", "redis://h:1/0"},
		{"redis://alice:se/cret@h:1", "redis://xxxxx@h:1"},
		{"redis://alice:se cret@h:1", "redis://xxxxx@h:1"},
		{"alice:se%zzcret@h:1", "xxxxx@h:1"},
		{"alice:secret@h:1", "xxxxx@h:1"}, // parses: scheme "alice"
		{"redis://h:1?password=secret&client_name=ops", "redis://h:1?client_name=ops&password=xxxxx"},
		{"redis://h:x?password=secret", "redis://h:x?xxxxx"},
	} {
		if got := redactURL(tc.in); got != tc.want {
			t.Errorf("redactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestCredentialPrecedence: the user and password sent come from the
// flag if given, else the -url, else the environment
// (LOCKGATE_REDIS_PASSWORD before REDISCLI_AUTH); the sentinels' password
// comes from LOCKGATE_SENTINEL_PASSWORD with -sentinel only. -db wins over
// the URL's /db; rediss:// turns TLS on and its skip_verify skips the
// verification. (t.Setenv: the package's tests do not run in parallel.)
func TestCredentialPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name       string
		env        map[string]string
		args       []string
		want       credentials
		db         int
		tls, skip  bool
		addr       string
		clientName string
	}{
		{name: "none", args: []string{"-addr", "h:1"}, addr: "h:1"},
		{name: "redis-cli's variable", env: map[string]string{envRedisCLIAuth: "cli"}, args: []string{"-addr", "h:1"},
			want: credentials{password: "cli", passwordFrom: envRedisCLIAuth}, addr: "h:1"},
		{name: "lockgate's variable first", env: map[string]string{envRedisCLIAuth: "cli", envPassword: "env"}, args: []string{"-addr", "h:1", "-user", "u"},
			want: credentials{user: "u", password: "env", passwordFrom: envPassword}, addr: "h:1"},
		{name: "an empty variable is unset", env: map[string]string{envPassword: "", envRedisCLIAuth: "cli"}, args: []string{"-addr", "h:1"},
			want: credentials{password: "cli", passwordFrom: envRedisCLIAuth}, addr: "h:1"},
		{name: "URL over variable", env: map[string]string{envPassword: "env"}, args: []string{"-url", "redis://u:url@h:1/3"},
			want: credentials{user: "u", password: "url", passwordFrom: "the -url"}, db: 3, addr: "h:1"},
		{name: "URL user, variable password", env: map[string]string{envPassword: "env"}, args: []string{"-url", "rediss://u@h:1"},
			want: credentials{user: "u", password: "env", passwordFrom: envPassword}, tls: true, addr: "h:1"},
		{name: "flags over URL", env: map[string]string{envPassword: "env"}, args: []string{"-url", "redis://u:url@h:1/3", "-user", "f", "-password", "flag", "-db", "4"},
			want: credentials{user: "f", password: "flag", passwordFrom: "-password"}, db: 4, addr: "h:1"},
		{name: "empty flag over URL", args: []string{"-url", "redis://u:url@h:1", "-password="},
			want: credentials{user: "u"}, addr: "h:1"},
		{name: "URL defaults and query", args: []string{"-url", "rediss://?skip_verify=true&client_name=ops&db=2"},
			tls: true, skip: true, db: 2, addr: "localhost:6379", clientName: "ops"},
		{name: "-tls with redis://", args: []string{"-url", "redis://h:1", "-tls"}, tls: true, addr: "h:1"},
		{name: "sentinel", env: map[string]string{envPassword: "env", envSentinelPassword: "spw"},
			args: []string{"-sentinel", "h:26379", "-master", "m", "-sentinel-user", "su", "-user", "u"},
			want: credentials{user: "u", password: "env", passwordFrom: envPassword, sentinelUser: "su", sentinelPassword: "spw"}, addr: "127.0.0.1:6379"},
		{name: "sentinel password without -sentinel", env: map[string]string{envSentinelPassword: "spw"}, args: []string{"-addr", "h:1"}, addr: "h:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{envPassword, envRedisCLIAuth, envSentinelPassword} {
				t.Setenv(name, tc.env[name])
			}
			c, _, err := parseGlobal(append(tc.args, "ping"))
			if err != nil {
				t.Fatal(err)
			}
			if c.creds != tc.want {
				t.Errorf("credentials %+v, want %+v", c.creds, tc.want)
			}
			if c.db != tc.db || c.tls.enabled != tc.tls || c.tls.insecure != tc.skip || c.addr != tc.addr || c.clientName != tc.clientName {
				t.Errorf("db %d tls %v skip %v addr %q client name %q; want %d %v %v %q %q",
					c.db, c.tls.enabled, c.tls.insecure, c.addr, c.clientName, tc.db, tc.tls, tc.skip, tc.addr, tc.clientName)
			}
		})
	}
}

// TestCAFileErrors: a -tls-ca-file that cannot be read, or holds no PEM
// certificate, fails the command (exit 1) before it dials, naming the file.
func TestCAFileErrors(t *testing.T) {
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{missing, "no such file"},
		{notPEM, "no PEM certificate"},
	} {
		r := lockgate(t, "-addr", addr, "-tls", "-tls-ca-file", tc.file, "ping")
		if r.code != exitFailed || !strings.Contains(r.stderr, tc.file) || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("-tls-ca-file %s: exit %d, stderr %q; want %d naming the file and %q", tc.file, r.code, r.stderr, exitFailed, tc.want)
		}
	}
}
