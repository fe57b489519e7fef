package lockhttp

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// Shared reaches the route as given, from an option or a Config field; a
// shared route with a limit is an error naming both settings, whichever
// came first (the control: shared alone, and a limit alone, are routes).
func TestSetupShared(t *testing.T) {
	tmpl := keyfunc.MustCompile("voucher:{path.voucher}")
	for _, tc := range []struct {
		name   string
		set    func(s *Setup)
		shared bool
		limit  int
		bad    []string // what the error names; nil for none
	}{
		{"none", func(*Setup) {}, false, 0, nil},
		{"option", func(s *Setup) { s.Shared("WithShared") }, true, 0, nil},
		{"field", func(s *Setup) { _, _ = s.ConfigRoute(Fields{Key: "v:{path.voucher}", Shared: true}) }, true, 0, nil},
		{"limit alone", func(s *Setup) { s.Limit("WithLimit", 2) }, false, 2, nil},
		{"option, then a limit", func(s *Setup) { s.Shared("WithShared"); s.Limit("WithLimit", 2) }, false, 0, []string{"WithShared", "WithLimit 2"}},
		{"a limit, then the option", func(s *Setup) { s.Limit("WithLimit", 3); s.Shared("WithShared") }, false, 0, []string{"WithShared", "WithLimit 3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSetup("testlock")
			tc.set(&s)
			r, err := s.Route(tmpl, "lock options")
			if tc.bad != nil {
				if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), "testlock") {
					t.Fatalf("error %v, want one matching core.ErrInvalid naming testlock", err)
				}
				for _, want := range tc.bad {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("error %q does not name %q", err, want)
					}
				}
				return
			}
			if err != nil || r.Shared != tc.shared || r.Limit != tc.limit {
				t.Fatalf("route shared %v limit %d, error %v; want shared %v limit %d", r.Shared, r.Limit, err, tc.shared, tc.limit)
			}
		})
	}
	t.Run("fields shared and limit", func(t *testing.T) {
		s := NewSetup("testlock")
		_, err := s.ConfigRoute(Fields{Key: "v:{path.voucher}", Shared: true, Limit: 2})
		if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), "Config.Shared") || !strings.Contains(err.Error(), "Config.Limit 2") {
			t.Fatalf("error %v, want one matching core.ErrInvalid naming Config.Shared and Config.Limit 2", err)
		}
	})
}
