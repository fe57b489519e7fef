package core_test

import (
	"strings"
	"testing"

	"github.com/lockgate/lockgate/internal/locktest"
)

// A Locker-only option passed to Lock is a compile error, not a run-time
// one. Control: the same program with a per-call option compiles.
func TestLockerOnlyOptionDoesNotCompile(t *testing.T) {
	t.Parallel()
	if out, err := locktest.Build(t, "testdata/lockoption"); err != nil {
		t.Fatalf("control program does not build: %v\n%s", err, out)
	}
	out, err := locktest.Build(t, "testdata/lockeronly")
	if err == nil {
		t.Fatal("a Locker-only option passed to Lock compiled")
	}
	if !strings.Contains(out, "WithPrefix") || !strings.Contains(out, "LockOption") {
		t.Fatalf("the build failed for another reason:\n%s", out)
	}
	t.Logf("compiler: %s", strings.TrimSpace(out))
}
