package core

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The version check refuses a server older than 7.0 naming its version;
// the policy check warns about every policy but noeviction. (A Redis 6 is
// not at hand to test against; the facts are read from the real server in
// TestServerRequirements.)
func TestJudgeServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		f           serverFacts
		unsupported string
		warning     string
	}{
		{serverFacts{version: "6.2.14", policy: "noeviction"}, "redis 6.2.14, 7.0.0 or later", ""},
		{serverFacts{version: "5.0.7"}, "redis 5.0.7", ""},
		{serverFacts{version: "7.0.0", policy: "noeviction"}, "", ""},
		{serverFacts{version: "7.0.15"}, "", ""}, // CONFIG GET not allowed: no policy known
		{serverFacts{version: "7.2.4", policy: "volatile-ttl"}, "", `maxmemory-policy is "volatile-ttl"`},
		{serverFacts{version: "8.0.1", policy: "allkeys-lru"}, "", `"allkeys-lru"`},
	} {
		u, w := judgeServer(tc.f)
		if (u == nil) != (tc.unsupported == "") || u != nil && (!errors.Is(u, ErrUnsupported) || !strings.Contains(u.Error(), tc.unsupported)) {
			t.Errorf("%+v: unsupported = %v, want %q", tc.f, u, tc.unsupported)
		}
		if (w == nil) != (tc.warning == "") || w != nil && !strings.Contains(w.Error(), tc.warning) {
			t.Errorf("%+v: warning = %v, want %q", tc.f, w, tc.warning)
		}
	}
	for _, tc := range []struct {
		a, b string
		less bool
	}{{"6.2.14", "7.0.0", true}, {"7.0.0", "7.0.0", false}, {"7.0.15", "7.0.0", false}, {"7.0", "7.0.1", true}, {"10.0.0", "7.0.0", false}} {
		if got := versionLess(tc.a, tc.b); got != tc.less {
			t.Errorf("versionLess(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

// A done marker outlives the last copy go-redis can send of a call: each of
// its retries may first wait up to PoolTimeout for a pooled connection, then
// dial, write, read and back off. With a 30s PoolTimeout the last copy can
// go out 3 × 33.5s after the first (before, the marker lived 4 × 3.5s and a
// re-sent acquire could run after its marker was gone). Control: a client
// without a read timeout is unbounded (the 1m default).
func TestMarkerOutlivesRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o    *redis.Options
		want time.Duration
	}{
		{&redis.Options{MaxRetries: 3, PoolTimeout: 30 * time.Second, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetryBackoff: 500 * time.Millisecond}, 3 * 33500 * time.Millisecond},
		{&redis.Options{}, 3 * (4*time.Second + 5*time.Second + 3*time.Second + 3*time.Second + 512*time.Millisecond)}, // go-redis defaults
		{&redis.Options{ReadTimeout: -1}, time.Minute},
	} {
		c := redis.NewClient(tc.o)
		got := markerTTL(c)
		c.Close()
		if got < tc.want {
			t.Errorf("markerTTL(%+v) = %v, want at least %v", tc.o, got, tc.want)
		}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{PoolTimeout: 30 * time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	defer cc.Close()
	if got, want := markerTTL(cc), 30*time.Second*3; got < want {
		t.Errorf("cluster markerTTL = %v, want at least %v", got, want)
	}
}
