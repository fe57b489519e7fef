package core

import (
	"strings"
	"testing"
)

// The common cases, a free lock taken and a hold released with no one
// waiting, return before the shared functions are defined (Redis creates a
// closure per function defined, every call): in the sources sent, the fast
// path's return comes before the queue's first function and after the
// clock's, which it uses.
func TestFastPathBeforeSharedFunctions(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ src, ret string }{
		"acquire": {acquireScript.src, "return take(clock(), false)"},
		"release": {releaseScript.src, "if not v[2] then return 0 end"},
	} {
		ret := strings.Index(tc.src, tc.ret)
		queue := strings.Index(tc.src, "local function keep(")
		clock := strings.Index(tc.src, "local function fence(")
		if ret < 0 || queue < 0 || clock < 0 || !(clock < ret && ret < queue) {
			t.Errorf("%s: fence defined at %d, fast path's return at %d, the queue's first function at %d: want them in that order", name, clock, ret, queue)
		}
		if !strings.HasPrefix(tc.src, "#!lua") {
			t.Errorf("%s: the flags line is not first", name)
		}
	}
	// Control: a script without the mark has every shared function first.
	src := withQueue("#!lua\nreturn 1\n", queueSrc)
	if strings.Index(src, "local function keep(") > strings.Index(src, "return 1") {
		t.Error("a script without the mark: its body comes before the shared functions")
	}
}
