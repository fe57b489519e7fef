package locktest

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// Build compiles the Go file at path (a program in a testdata folder,
// which the go tool leaves out of ./...) with `go build`, discarding the
// binary, and returns the compiler's output and error: for tests that a
// misuse does not compile, each with a control that compiles. path is a
// file or a package directory. The go tool must be on PATH (make test runs
// it).
func Build(t testing.TB, path string) (string, error) {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("the go tool is not on PATH:", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gobin, "build", "-o", filepath.Join(t.TempDir(), "out"), abs)
	cmd.Dir = filepath.Dir(abs)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Panics calls f and returns the value it panicked with, nil when it
// returned: for tests that a misuse panics at setup.
func Panics(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}
