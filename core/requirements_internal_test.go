package core

import (
	"errors"
	"strings"
	"testing"
)

// The version check refuses a server older than 7.0 naming its version;
// the policy check warns about every policy but noeviction. (A Redis 6 is
// not at hand to test against; the facts are read from the real server in
// TestServerRequirements.)
func TestJudgeServer(t *testing.T) {
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
