package core_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A Locker-only option passed to Lock is a compile error, not a run-time
// one. Control: the same program with a per-call option compiles.
func TestLockerOnlyOptionDoesNotCompile(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := func(dir string) (string, error) {
		cmd := exec.Command(goTool, "build", "-o", filepath.Join(t.TempDir(), "prog"), "./testdata/"+dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := build("lockoption"); err != nil {
		t.Fatalf("control program does not build: %v\n%s", err, out)
	}
	out, err := build("lockeronly")
	if err == nil {
		t.Fatal("a Locker-only option passed to Lock compiled")
	}
	if !strings.Contains(out, "WithPrefix") || !strings.Contains(out, "LockOption") {
		t.Fatalf("the build failed for another reason:\n%s", out)
	}
	t.Logf("compiler: %s", strings.TrimSpace(out))
}
