package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// TestSentinelFindsMaster: with -sentinel and -master, the command finds
// the master through the sentinel and sees the lock a Locker on a failover
// client holds there; ping names the master and its address.
func TestSentinelFindsMaster(t *testing.T) {
	st := redistest.StartSentinel(t)
	l := newLocker(t, st.Client(t))
	lease := take(t, l, "order:9")

	r := mustRun(t, "-sentinel", strings.Join(st.SentinelAddrs, ","), "-master", st.MasterName, "ping")
	if want := "ok: Sentinel master " + st.MasterName + " at " + st.Master.Addr + "\n"; r.stdout != want {
		t.Errorf("ping through Sentinel printed %q, want %q", r.stdout, want)
	}

	r = mustRun(t, "-sentinel", strings.Join(st.SentinelAddrs, ","), "-master", st.MasterName, "inspect", "order:9")
	got, _, _ := rows(t, r.stdout)
	checkCells(t, got["order:9"], map[string]string{"HELD": "yes", "FENCE": strconv.FormatInt(lease.Fence(), 10)})

	r = lockgate(t, "-sentinel", strings.Join(st.SentinelAddrs, ","), "-master", "no-such-master", "-timeout", "1s", "inspect", "order:9")
	if r.code != 1 || !strings.Contains(r.stderr, "unavailable") {
		t.Errorf("an unknown master: exit %d %q, want 1 and unavailable", r.code, r.stderr)
	}
}

// TestSentinelCredentials: sentinels that let in only the ACL user
// sentry (their default user off) are reached with -sentinel-user and
// the password in LOCKGATE_SENTINEL_PASSWORD; without the password the
// command fails (exit 1) saying NOAUTH and pointing at the sentinels'
// credentials, and no output holds the password. The master itself needs
// none. (t.Setenv: the package's tests do not run in parallel.)
func TestSentinelCredentials(t *testing.T) {
	const password = "sentinel-Rm5wB2"
	st := redistest.StartSentinel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, addr := range st.SentinelAddrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		err := c.Do(ctx, "ACL", "SETUSER", "sentry", "on", ">"+password, "+@all").Err()
		if err == nil {
			err = c.Do(ctx, "ACL", "SETUSER", "default", "off").Err()
		}
		c.Close()
		if err != nil {
			t.Fatalf("sentinel %s: %v", addr, err)
		}
	}
	args := []string{"-sentinel", strings.Join(st.SentinelAddrs, ","), "-master", st.MasterName, "-sentinel-user", "sentry", "-timeout", "3s", "ping"}

	t.Setenv(envSentinelPassword, password)
	r := mustRun(t, args...)
	if want := "ok: Sentinel master " + st.MasterName + " at " + st.Master.Addr + "\n"; r.stdout != want {
		t.Errorf("ping printed %q, want %q", r.stdout, want)
	}

	t.Setenv(envSentinelPassword, "")
	r2 := lockgate(t, args...)
	hint := "authentication to the sentinels failed: user sentry and no password; set " + envSentinelPassword
	if r2.code != exitFailed || !strings.Contains(r2.stderr, "NOAUTH") || !strings.Contains(r2.stderr, hint) {
		t.Errorf("without the sentinels' password: exit %d, stderr %q; want %d, NOAUTH and %q", r2.code, r2.stderr, exitFailed, hint)
	}
	for _, r := range []result{r, r2} {
		if strings.Contains(r.stdout+r.stderr, password) {
			t.Errorf("an output holds the password: %q %q", r.stdout, r.stderr)
		}
	}
}

// TestSentinelsRefusing: with every sentinel refusing connections, ping
// fails (exit 1) at once naming the sentinels' refusal, well within its
// -timeout.
func TestSentinelsRefusing(t *testing.T) {
	var dead []string
	for range 2 {
		s := redistest.Start(t)
		s.Stop()
		dead = append(dead, s.Addr)
	}
	r := lockgate(t, "-sentinel", strings.Join(dead, ","), "-master", "mymaster", "-timeout", "5s", "ping")
	if r.code != 1 || !strings.Contains(r.stderr, "sentinel addresses") || !strings.Contains(r.stderr, "connection refused") {
		t.Errorf("every sentinel refusing: exit %d %q, want 1 naming the sentinels' refusal", r.code, r.stderr)
	}
	if r.took > 2*time.Second {
		t.Errorf("every sentinel refusing: ping took %v, want the refusal at once (timeout 5s)", r.took)
	}
}
