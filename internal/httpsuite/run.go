package httpsuite

import "testing"

// run is filled in by the suite's cases (cases.go).
func run(t *testing.T, s Stack) {
	t.Fatalf("httpsuite: the suite's cases are not written yet (stack %s)", s.Name)
}
