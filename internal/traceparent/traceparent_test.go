package traceparent_test

import (
	"strings"
	"testing"

	"github.com/lockgate/lockgate/internal/traceparent"
)

func TestParse(t *testing.T) {
	const id, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	valid := "00-" + id + "-" + span + "-01"
	for _, c := range []struct {
		s  string
		ok bool
	}{
		{valid, true},
		{"01-" + id + "-" + span + "-01", true},                   // a later version, nothing appended
		{"01-" + id + "-" + span + "-01-extra", true},             // a later version's further field
		{valid + "-extra", false},                                 // version 00 is exactly 55 bytes
		{"01-" + id + "-" + span + "-01x", false},                 // no '-' before the further field
		{"ff-" + id + "-" + span + "-01", false},                  // version ff is invalid
		{"00-" + strings.ToUpper(id) + "-" + span + "-01", false}, // lowercase hex only
		{"00-" + strings.Repeat("0", 32) + "-" + span + "-01", false},
		{"00-" + id + "-" + strings.Repeat("0", 16) + "-01", false},
		{"00-" + id + "_" + span + "-01", false},
		{valid[:54], false},
		{"", false},
	} {
		gotID, gotSpan, flags, ok := traceparent.Parse(c.s)
		if ok != c.ok {
			t.Errorf("Parse(%q) ok = %v, want %v", c.s, ok, c.ok)
			continue
		}
		if ok && (gotID != id || gotSpan != span || flags != "01") {
			t.Errorf("Parse(%q) = %q %q %q", c.s, gotID, gotSpan, flags)
		}
	}
}
