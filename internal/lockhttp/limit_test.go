package lockhttp

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// A limit reaches the route as given; an option's limit below 1 and a
// Config field's negative limit are errors naming the setting, and a
// Config field's zero keeps the lock (the control: no limit, Limit 0).
func TestSetupLimit(t *testing.T) {
	tmpl := keyfunc.MustCompile("export:{query.tenant}")
	route := func(set func(s *Setup)) (Route, error) {
		s := NewSetup("testlock")
		set(&s)
		return s.Route(tmpl, "lock options")
	}
	for _, tc := range []struct {
		name  string
		set   func(s *Setup)
		limit int
		bad   string // the setting the error names; "" for none
	}{
		{"none", func(*Setup) {}, 0, ""},
		{"option 3", func(s *Setup) { s.Limit("WithLimit", 3) }, 3, ""},
		{"option 1", func(s *Setup) { s.Limit("WithLimit", 1) }, 1, ""},
		{"option 0", func(s *Setup) { s.Limit("WithLimit", 0) }, 0, "WithLimit"},
		{"option -1", func(s *Setup) { s.Limit("WithLimit", -1) }, 0, "WithLimit"},
		{"field 0", func(s *Setup) { s.ConfigLimit("Config.Limit", 0) }, 0, ""},
		{"field 2", func(s *Setup) { s.ConfigLimit("Config.Limit", 2) }, 2, ""},
		{"field -2", func(s *Setup) { s.ConfigLimit("Config.Limit", -2) }, 0, "Config.Limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := route(tc.set)
			if tc.bad != "" {
				if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), tc.bad) || !strings.Contains(err.Error(), "testlock") {
					t.Fatalf("error %v, want one matching core.ErrInvalid naming testlock and %s", err, tc.bad)
				}
				return
			}
			if err != nil || r.Limit != tc.limit {
				t.Fatalf("route limit %d, error %v; want %d", r.Limit, err, tc.limit)
			}
		})
	}
}
