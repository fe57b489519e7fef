//go:build ignore

// testprogress (make test): reads `go test -json` on standard input and
// prints a short progress report instead of go test's silence while it builds
// and runs:
//
//	[0:42] run   github.com/lockgate/lockgate/core
//	[1:55] ok    github.com/lockgate/lockgate/core  73.1s
//	[2:15] ...   building (3 ok, 0 failed so far)
//
// A line for each package when its first test starts and one when it ends
// (ok, FAIL, or skip when it has no tests), and a heartbeat after 20 s without
// output saying what is still running (or that go is building). A green run
// prints no test's output. For a failing package it prints the output of
// every failed test (and the package's own lines: panics, timeouts, race
// reports), as plain `go test` shows them; build errors are printed as they
// come. Lines that are not JSON (go's own messages) are passed through.
//
// It exits 1 when any package or test failed, so that a pipeline with
// pipefail fails even if go test's own exit code were lost.
//
// Run it with `go run scripts/testprogress.go` (the build tag keeps it out of
// the module's packages), or build it once: the Makefile builds it into
// bin/tools/testprogress.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// event is one line of `go test -json` (cmd/test2json), with the build
// events of Go 1.24 and later (ImportPath, build-output, build-fail).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string
	FailedBuild string
}

// line is one line of output and the test it belongs to ("" for the
// package's own).
type line struct{ test, text string }

// pkgState is what is kept of one package while it runs.
type pkgState struct {
	ran    bool            // a test of it has started (its "run" line is printed)
	lines  []line          // its output in the order it came
	failed map[string]bool // tests that failed
	took   []testTime      // its top-level tests' times, as they ended
}

type testTime struct {
	name    string
	seconds float64
}

// slowPackage is how long a package runs before its ok line names its
// slowest tests (where the time of make test goes).
const slowPackage = 60

type reporter struct {
	mu       sync.Mutex
	start    time.Time
	last     time.Time // last line printed
	pkgs     map[string]*pkgState
	running  map[string]bool
	ok, fail int
	skipped  int
	anyFail  bool
	// Top-level tests (examples and fuzz seeds included) by their result.
	passed, failed, skippedTests int
	recap                        string // file the failed tests' recap is appended to ("": none)
}

func main() {
	totals := flag.String("totals", "", "add this run's test counts to `file` (created when missing) and print the sums")
	since := flag.Int64("since", 0, "count the times printed from this Unix `time` (make test's start) instead of from now")
	recap := flag.String("recap", "", "append each failed test's name and its first messages to `file`, for make test's closing lines")
	flag.Parse()
	start := time.Now()
	if *since > 0 {
		start = time.Unix(*since, 0)
	}
	r := &reporter{start: start, last: time.Now(), pkgs: map[string]*pkgState{}, running: map[string]bool{}, recap: *recap}
	go r.heartbeat(10 * time.Second)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1024*1024), 64*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
			r.printf("%s", line) // go's own messages (download, vet, setup errors)
			continue
		}
		r.handle(e)
	}
	if err := sc.Err(); err != nil {
		r.printf("testprogress: reading input: %v", err)
		r.anyFail = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Printf("%s done: %d packages ok, %d failed, %d without tests; tests: %d passed, %d failed, %d skipped\n",
		r.stamp(), r.ok, r.fail, r.skipped, r.passed, r.failed, r.skippedTests)
	if *totals != "" {
		addTotals(*totals, r.passed, r.failed, r.skippedTests)
	}
	if r.anyFail {
		os.Exit(1)
	}
}

func (r *reporter) stamp() string {
	d := time.Since(r.start).Round(time.Second)
	return fmt.Sprintf("[%d:%02d]", int(d.Minutes()), int(d.Seconds())%60)
}

func (r *reporter) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.printfLocked(format, args...)
}

func (r *reporter) printfLocked(format string, args ...any) {
	fmt.Printf(format+"\n", args...)
	r.last = time.Now()
}

func (r *reporter) state(pkg string) *pkgState {
	s := r.pkgs[pkg]
	if s == nil {
		s = &pkgState{failed: map[string]bool{}}
		r.pkgs[pkg] = s
	}
	return s
}

func (r *reporter) handle(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.Action {
	case "build-output":
		// Compiler errors: shown as they come (go test's "# pkg" lines too).
		fmt.Print(e.Output)
		r.last = time.Now()
		return
	case "build-fail":
		r.anyFail = true
		return
	}
	if e.Package == "" {
		return
	}
	s := r.state(e.Package)
	if e.Test != "" && !s.ran {
		// Announced with its first test, so packages without tests
		// (started and skipped at once) print no line.
		s.ran = true
		r.printfLocked("%s run   %s", r.stamp(), e.Package)
	}
	switch e.Action {
	case "start":
		r.running[e.Package] = true
	case "output":
		s.lines = append(s.lines, line{e.Test, e.Output})
	case "fail":
		if e.Test != "" {
			s.failed[e.Test] = true
			if !strings.Contains(e.Test, "/") {
				r.failed++
				s.took = append(s.took, testTime{e.Test, e.Elapsed})
			}
			return
		}
		r.fail++
		r.anyFail = true
		delete(r.running, e.Package)
		r.printfLocked("%s FAIL  %s  %.1fs", r.stamp(), e.Package, e.Elapsed)
		r.dumpLocked(s)
		r.recapLocked(e.Package, s)
		delete(r.pkgs, e.Package)
	case "pass":
		if e.Test != "" {
			if !strings.Contains(e.Test, "/") {
				r.passed++
				s.took = append(s.took, testTime{e.Test, e.Elapsed})
			}
			return
		}
		r.ok++
		delete(r.running, e.Package)
		r.printfLocked("%s ok    %s  %.1fs", r.stamp(), e.Package, e.Elapsed)
		if e.Elapsed >= slowPackage {
			r.printfLocked("      slowest: %s", slowest(s.took, 8))
		}
		delete(r.pkgs, e.Package)
	case "skip":
		if e.Test != "" {
			if !strings.Contains(e.Test, "/") {
				r.skippedTests++
			}
			return
		}
		delete(r.running, e.Package)
		delete(r.pkgs, e.Package)
		r.skipped++ // no test files: no line, counted in the summary
	}
}

// dumpLocked prints a failed package's output as plain go test would, in
// the order it came: the lines of the failed tests (a parent fails with its
// subtest) and the package's own (panics, timeouts, race reports, the FAIL
// summary), without the passing tests' and test2json's framing lines. When no
// test is marked failed (the binary crashed before reporting) every line is
// printed.
func (r *reporter) dumpLocked(s *pkgState) {
	anyTest := len(s.failed) > 0
	var b strings.Builder
	for _, l := range s.lines {
		if (l.test == "" || !anyTest || s.failed[l.test]) && !framing(l.text) {
			b.WriteString(l.text)
		}
	}
	out := strings.TrimSuffix(b.String(), "\n")
	for _, l := range strings.Split(out, "\n") {
		fmt.Println("    | " + l)
	}
	fmt.Println()
	r.last = time.Now()
}

// recapLines is how many of a failed test's own messages the recap keeps: the
// last ones, where t.Fatal and a panic are (t.Log's lines look the same).
const recapLines = 4

// recapLocked appends to the recap file a line per failed test of the package
// (a subtest's parent is left out, its subtest names it) and under it the
// last of its messages that name a file and line (t.Error and t.Fatal's), so
// that the end of a long make test says what failed even where only its last
// lines are seen. A package that failed without a failed test (a crash, a
// timeout) gets a line saying so.
func (r *reporter) recapLocked(pkg string, s *pkgState) {
	if r.recap == "" {
		return
	}
	var b strings.Builder
	var names []string
	for t := range s.failed {
		if !hasFailedChild(s.failed, t) {
			names = append(names, t)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		fmt.Fprintf(&b, "%s: the package failed without a failed test (a crash or a timeout: see its output above)\n", pkg)
	}
	for _, t := range names {
		fmt.Fprintf(&b, "%s %s\n", pkg, t)
		var kept []string
		for _, l := range s.lines {
			if l.test == t && (fileLine(l.text) || strings.HasPrefix(l.text, "panic:")) {
				kept = append(kept, strings.TrimSpace(l.text))
			}
		}
		for _, k := range kept[max(0, len(kept)-recapLines):] {
			fmt.Fprintf(&b, "      %s\n", k)
		}
	}
	f, err := os.OpenFile(r.recap, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.WriteString(b.String())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testprogress: %v\n", err)
	}
}

// hasFailedChild reports whether a subtest of test failed.
func hasFailedChild(failed map[string]bool, test string) bool {
	for t := range failed {
		if strings.HasPrefix(t, test+"/") {
			return true
		}
	}
	return false
}

// fileLine reports a test's message line: "    name_test.go:42: ...", not a
// stack trace's "/path/name.go:42 +0x1f".
func fileLine(l string) bool {
	t := strings.TrimSpace(l)
	i := strings.Index(t, ".go:")
	if i <= 0 || strings.ContainsAny(t[:i], " \t") {
		return false
	}
	rest := strings.TrimLeft(t[i+4:], "0123456789")
	return len(rest) < len(t[i+4:]) && strings.HasPrefix(rest, ":")
}

// framing reports test2json's lines that plain go test (without -v) does not
// print: a test's start, pause and continue, and the passes of its subtests.
func framing(l string) bool {
	t := strings.TrimLeft(l, " ")
	return strings.HasPrefix(t, "=== RUN") || strings.HasPrefix(t, "=== PAUSE") ||
		strings.HasPrefix(t, "=== CONT") || strings.HasPrefix(t, "=== NAME") ||
		strings.HasPrefix(t, "--- PASS") || strings.HasPrefix(t, "--- SKIP")
}

// slowest names the n longest of took with their times.
func slowest(took []testTime, n int) string {
	sort.Slice(took, func(i, j int) bool { return took[i].seconds > took[j].seconds })
	var parts []string
	for _, t := range took[:min(n, len(took))] {
		parts = append(parts, fmt.Sprintf("%s %.1fs", t.name, t.seconds))
	}
	return strings.Join(parts, ", ")
}

// heartbeat prints what is still going on after every quiet stretch.
func (r *reporter) heartbeat(quiet time.Duration) {
	for range time.Tick(time.Second) {
		r.mu.Lock()
		if time.Since(r.last) >= quiet {
			if len(r.running) == 0 {
				r.printfLocked("%s ...   building (%d ok, %d failed so far)", r.stamp(), r.ok, r.fail)
			} else {
				names := make([]string, 0, len(r.running))
				for p := range r.running {
					names = append(names, p)
				}
				sort.Strings(names)
				r.printfLocked("%s ...   running %s", r.stamp(), strings.Join(names, ", "))
			}
		}
		r.mu.Unlock()
	}
}

// addTotals adds the counts to those in file (three numbers) and writes the
// sums back, so that make test can close with one line for all modules.
func addTotals(file string, passed, failed, skipped int) {
	var p, f, s int
	if b, err := os.ReadFile(file); err == nil {
		fmt.Sscan(string(b), &p, &f, &s)
	}
	p, f, s = p+passed, f+failed, s+skipped
	if err := os.WriteFile(file, []byte(fmt.Sprintf("%d %d %d\n", p, f, s)), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "testprogress: %v\n", err)
	}
}
