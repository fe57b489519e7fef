package rpclock_test

import (
	"strings"
	"testing"

	"github.com/lockgate/lockgate/internal/rpclock"
	lockgatev1 "github.com/lockgate/lockgate/proto/lockgate/v1"
)

// TestSharedCompiled: an annotation's shared and a Go rule's Shared reach
// the compiled method; the control, an annotation without it, compiles to
// the exclusive lock. Shared with a limit is an error, from an annotation
// and from a Go rule, naming both.
func TestSharedCompiled(t *testing.T) {
	files := annotatedFiles(t, map[string]*lockgatev1.LockRule{
		"Read":   {Key: "voucher:{user_id}", Shared: true},
		"Write":  {Key: "voucher:{user_id}"},
		"ByRule": {Key: "voucher:{user_id}"},
	})
	methods, err := rpclock.Load(&rpclock.Config{
		Name:  "test",
		Files: files,
		Rules: map[string]rpclock.Rule{"/dyn.S/ByRule": {Key: "voucher:{user_id}", Shared: true}},
		Order: []string{"/dyn.S/ByRule"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"/dyn.S/Read": true, "/dyn.S/Write": false, "/dyn.S/ByRule": true} {
		if m := methods[name]; m == nil || m.Shared != want || m.Limit != 0 {
			t.Errorf("%s: %+v, want Shared %v and no limit", name, m, want)
		}
	}

	for _, tc := range []struct {
		name string
		cfg  *rpclock.Config
		want []string
	}{
		{"annotation", &rpclock.Config{Name: "test", Files: annotatedFiles(t, map[string]*lockgatev1.LockRule{
			"Both": {Key: "voucher:{user_id}", Shared: true, Limit: 2},
		})}, []string{"/dyn.S/Both", "annotation", "shared with limit 2"}},
		{"Go rule", &rpclock.Config{Name: "test", Files: annotatedFiles(t, map[string]*lockgatev1.LockRule{
			"Both": {Key: "voucher:{user_id}"},
		}), Rules: map[string]rpclock.Rule{"/dyn.S/Both": {Key: "voucher:{user_id}", Shared: true, Limit: 3}}, Order: []string{"/dyn.S/Both"}},
			[]string{"/dyn.S/Both", "Rule.Shared with Rule.Limit 3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rpclock.Load(tc.cfg)
			if err == nil {
				t.Fatal("shared with a limit loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
