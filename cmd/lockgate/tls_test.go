package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The ACL user of the TLS tests and its password, and a wrong one: no
// output may hold either.
const (
	aclUser       = "alice"
	aclPassword   = "secret-Hq4vN8"
	wrongPassword = "wrong-Jc2mT5"
)

// TestTLSAndACLUser: against a redis-server that speaks TLS with a
// certificate of a throwaway CA and lets in only the ACL user alice (its
// default user is off), ping, inspect and ls succeed through a
// rediss://alice:PASSWORD@ URL with -tls-ca-file, through -addr -tls -user
// with the password in LOCKGATE_REDIS_PASSWORD or REDISCLI_AUTH, through a
// URL without password and the variable, with -tls-server-name naming the
// certificate's other name, and with -tls-insecure-skip-verify without the
// CA. The controls fail (exit 1) as they must: a wrong password says
// WRONGPASS and where the password came from, no credentials NOAUTH, no
// CA a certificate error, a server
// name the certificate does not hold a certificate error, plain redis://
// to the TLS port fails and suggests TLS. No output, error or help text holds a password.
// (t.Setenv: the package's tests do not run in parallel.)
func TestTLSAndACLUser(t *testing.T) {
	srv := startTLSServer(t)
	l := newLocker(t, srv.addACLUser(t, aclUser, aclPassword))
	lease := take(t, l, "order:7")
	fence := strconv.FormatInt(lease.Fence(), 10)
	tlsPort := srv.tlsAddr[strings.LastIndex(srv.tlsAddr, ":")+1:]
	withPassword := "rediss://" + aclUser + ":" + aclPassword + "@" + srv.tlsAddr
	noPassword := "rediss://" + aclUser + "@" + srv.tlsAddr
	viaAddr := []string{"-addr", srv.tlsAddr, "-tls", "-tls-ca-file", srv.pki.caFile, "-user", aclUser}
	reached := "ok: server " + srv.tlsAddr + ", TLS, user " + aclUser + "\n"

	var outputs []result
	run := func(env map[string]string, args ...string) result {
		t.Helper()
		for _, name := range []string{envPassword, envRedisCLIAuth} {
			t.Setenv(name, env[name])
		}
		r := lockgate(t, args...)
		outputs = append(outputs, r)
		return r
	}
	t.Cleanup(func() {
		for _, r := range outputs {
			for _, secret := range []string{aclPassword, wrongPassword} {
				if strings.Contains(r.stdout, secret) || strings.Contains(r.stderr, secret) {
					t.Errorf("an output holds a password: stdout %q stderr %q", r.stdout, r.stderr)
				}
			}
		}
	})
	env := map[string]string{envPassword: aclPassword}

	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		ping string // ping's line
	}{
		{"rediss URL with the password", nil, []string{"-url", withPassword, "-tls-ca-file", srv.pki.caFile}, reached},
		{"-addr -tls -user, LOCKGATE_REDIS_PASSWORD", env, viaAddr, reached},
		{"-addr -tls -user, REDISCLI_AUTH", map[string]string{envRedisCLIAuth: aclPassword}, viaAddr, reached},
		{"rediss URL without the password, LOCKGATE_REDIS_PASSWORD", env, []string{"-url", noPassword, "-tls-ca-file", srv.pki.caFile}, reached},
		{"-tls-server-name", env, slices.Concat(viaAddr, []string{"-tls-server-name", tlsName}), reached},
		{"-tls-insecure-skip-verify", env, []string{"-addr", srv.tlsAddr, "-tls", "-tls-insecure-skip-verify", "-user", aclUser},
			"ok: server " + srv.tlsAddr + ", TLS without certificate verification, user " + aclUser + "\n"},
		{"rediss URL with skip_verify", nil, []string{"-url", withPassword + "/0?skip_verify=true"},
			"ok: server " + srv.tlsAddr + ", TLS without certificate verification, user " + aclUser + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := run(tc.env, slices.Concat(tc.args, []string{"ping"})...); r.code != exitOK || r.stdout != tc.ping {
				t.Errorf("ping: exit %d, stdout %q, stderr %q; want 0 and %q", r.code, r.stdout, r.stderr, tc.ping)
			}
			r := run(tc.env, slices.Concat(tc.args, []string{"inspect", "order:7"})...)
			if r.code != exitOK {
				t.Fatalf("inspect: exit %d, stderr %q", r.code, r.stderr)
			}
			got, _, _ := rows(t, r.stdout)
			checkCells(t, got["order:7"], map[string]string{"HELD": "yes", "FENCE": fence})
			r = run(tc.env, slices.Concat(tc.args, []string{"ls"})...)
			if r.code != exitOK {
				t.Fatalf("ls: exit %d, stderr %q", r.code, r.stderr)
			}
			got, order, footer := rows(t, r.stdout)
			if len(order) != 1 || footer != "(1 lock)" {
				t.Errorf("ls listed %q %q, want order:7 and (1 lock)", order, footer)
			}
			checkCells(t, got["order:7"], map[string]string{"HELD": "yes", "FENCE": fence})
		})
	}

	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want []string // in stderr, any case
	}{
		{"wrong password in the URL", env, []string{"-url", "rediss://" + aclUser + ":" + wrongPassword + "@" + srv.tlsAddr, "-tls-ca-file", srv.pki.caFile},
			[]string{"WRONGPASS", "authentication failed: user alice, the password from the -url"}},
		{"wrong password in the environment", map[string]string{envPassword: wrongPassword}, viaAddr,
			[]string{"WRONGPASS", "authentication failed: user alice, the password from " + envPassword}},
		{"wrong password in REDISCLI_AUTH", map[string]string{envRedisCLIAuth: wrongPassword}, viaAddr,
			[]string{"WRONGPASS", "authentication failed: user alice, the password from " + envRedisCLIAuth}},
		{"no credentials", nil, []string{"-addr", srv.tlsAddr, "-tls", "-tls-ca-file", srv.pki.caFile},
			[]string{"NOAUTH", "authentication failed: user default and no password; set " + envPassword}},
		{"no CA, no skip-verify", env, []string{"-url", noPassword}, []string{"certificate", "unknown authority"}},
		{"a name the certificate does not hold", env, slices.Concat(viaAddr, []string{"-tls-server-name", "other.test"}), []string{"certificate", "other.test"}},
		{"plain redis:// to the TLS port", nil, []string{"-url", "redis://" + aclUser + ":" + aclPassword + "@" + srv.tlsAddr}, []string{"unavailable", tlsPort, "if this port speaks TLS, add -tls or use a rediss:// -url"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(tc.env, slices.Concat(tc.args, []string{"-timeout", "3s", "ping"})...)
			if r.code != exitFailed || r.stdout != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", r.code, r.stdout, exitFailed)
			}
			for _, want := range tc.want {
				if !strings.Contains(strings.ToLower(r.stderr), strings.ToLower(want)) {
					t.Errorf("stderr %q does not say %q", r.stderr, want)
				}
			}
			if r.took > 3*time.Second {
				t.Errorf("took %v: want it to fail before -timeout 3s", r.took)
			}
		})
	}

	// The help never shows a password, whatever the flags and environment.
	for _, args := range [][]string{{"-url", withPassword, "-h"}, {"-password", aclPassword, "help"}, {"-url", withPassword, "help", "ping"}} {
		if r := run(env, args...); r.code != exitOK {
			t.Errorf("%q: exit %d, want 0", redactArgs(args), r.code)
		}
	}
}
