package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockgate/lockgate/example/seckill"
)

// seckillCmd runs this test binary as the seckill command.
func seckillCmd(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Env = append(os.Environ(), "SECKILL_TEST_MAIN=1", "REDIS_URL=")
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

func TestServeHelpDocumentsEachFlag(t *testing.T) {
	out, err := seckillCmd(context.Background(), t, "serve", "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("serve -h: %v\n%s", err, out)
	}
	for _, flag := range []string{"-addr", "-grpc-addr", "-connect-addr", "-redis", "-db", "-lock", "-http", "-wait", "-ttl", "-unique-index",
		"-read-header-timeout", "-read-timeout", "-write-timeout", "-idle-timeout", "-trace-stdout", "-write-limit", "-count-writes"} {
		if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(flag) + `\b.*\n\s+\S`).Match(out) {
			t.Errorf("serve -h does not document %s:\n%s", flag, out)
		}
	}
	// -http names every stack, and the synopsis says which adapter each
	// locks with.
	usage := regexp.MustCompile(`(?m)^\s+-http\b.*\n(\s+.*\n)*`).Find(out)
	for _, stack := range seckill.Stacks {
		if !regexp.MustCompile(`\b` + stack + `\b`).Match(usage) {
			t.Errorf("serve -h: -http does not name the stack %s:\n%s", stack, usage)
		}
		if !regexp.MustCompile(`(?m)^\s+` + stack + `\s+\S.*middleware/`).Match(out) {
			t.Errorf("serve -h does not say which adapter -http %s locks with:\n%s", stack, out)
		}
	}
	if code := func() int {
		err := seckillCmd(context.Background(), t, "serve", "-http", "martini", "-lock", "none", "-db", filepath.Join(t.TempDir(), "s.db")).Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 0
	}(); code == 0 {
		t.Error("serve -http martini: exit status 0, want a failure")
	}
}

// TestSeedReport: seed then report print their results; report's line is
// exactly "orders=N duplicates=N oversold=N".
func TestSeedReport(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "s.db")
	if out, err := seckillCmd(context.Background(), t, "seed", "-db", db, "-voucher", "3", "-stock", "5").CombinedOutput(); err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	out, err := seckillCmd(context.Background(), t, "report", "-db", db, "-voucher", "3").Output()
	if err != nil || string(out) != "orders=0 duplicates=0 oversold=0\n" {
		t.Fatalf("report: %q %v", out, err)
	}
	if out, err := seckillCmd(context.Background(), t, "report", "-db", db, "-voucher", "4").CombinedOutput(); err == nil {
		t.Fatalf("report of an unknown voucher succeeded: %s", out)
	}
	if out, err := seckillCmd(context.Background(), t, "serve", "-lock", "zookeeper", "-db", db).CombinedOutput(); err == nil || !strings.Contains(string(out), "-lock") {
		t.Fatalf("serve -lock zookeeper: %v %s", err, out)
	}
}

var (
	modeLine  = regexp.MustCompile(`(?m)^mode=(\w+) orders=(\d+) duplicates=(\d+) oversold=(\d+)$`)
	chaosLine = regexp.MustCompile(`(?m)^chaos=(\w+) orders=(\d+) duplicates=(\d+) oversold=(\d+)$`)
	nodesLine = regexp.MustCompile(`demo: -lock \w+: \d+ nodes ([^,]*),`)
	// The write limit's lines (demo.go, writeLimitLine).
	writePeakLine = regexp.MustCompile(`(?m)^mode=redis write limit: peak order writes of voucher \d+ in progress at once across the \d+ nodes: (\d+) \(([^)]*)\)$`)
	permitsLine   = regexp.MustCompile(`(?m)^mode=redis write permits: (\d+) taken, (\d+) orders waited`)
)

// TestDemo runs `seckill demo` at CI size as the Makefile does: its own
// redis-server, 3 serve processes sharing it and one SQLite file, -lock
// local then -lock redis. The redis mode must show no duplicate and no
// oversell (the demo's exit status says so too), the output has the two
// mode= lines, and no node is left listening afterwards. Then the chaos
// round (Redis flushed while the database stalls): chaos=fenced with one
// order per user (20) and no duplicate, and chaos=unfenced, its control,
// with duplicates.
func TestDemo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := seckillCmd(ctx, t, "demo", "-users", "40", "-dup", "4", "-stock", "30")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("demo output:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, tailOf(stderr.String()))
	}
	lines := modeLine.FindAllStringSubmatch(stdout.String(), -1)
	if len(lines) != 2 || lines[0][1] != "local" || lines[1][1] != "redis" {
		t.Fatalf("want mode=local then mode=redis lines, got %q", lines)
	}
	if r := lines[1]; r[3] != "0" || r[4] != "0" || r[2] != "30" {
		t.Fatalf("redis mode: %s, want orders=30 duplicates=0 oversold=0", r[0])
	}
	for _, h := range []string{"requests", "200 ordered", "400 already purchased", "400 out of stock", "429 busy", "5xx", "orders", "duplicates", "oversold", "latency p50", "latency p99"} {
		if !strings.Contains(stdout.String(), "\n"+h+" ") {
			t.Errorf("table lacks the row %q", h)
		}
	}
	// The lock rows, from the nodes' /metrics: n/a under -lock local (no
	// lockgate lock), figures under -lock redis. Every order took the
	// lock once, so the redis column counts at least the requests that
	// passed validation (all of them here); renewals are rare at this size
	// (10s TTL), so that row may be n/a.
	for _, c := range []struct{ row, redis string }{
		{"lock acquires", `\d+`}, {"lock hit rate", `\d+\.\d%`}, {"lock wait p50", `\d+\.\dms`},
		{"lock wait p99", `\d+\.\dms`}, {"renewal success", `(\d+\.\d%|n/a)`},
	} {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(c.row) + ` +n/a +` + c.redis + `$`)
		if !re.MatchString(stdout.String()) {
			t.Errorf("table row %q: want n/a (local) then %s (redis)", c.row, c.redis)
		}
	}
	// Each redis-mode request that passed validation (all) made one Lock call.
	cell := func(row string) string {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(row) + ` +\S+ +(\S+)$`).FindStringSubmatch(stdout.String())
		if m == nil {
			return ""
		}
		return m[1]
	}
	if req, acq := cell("requests"), cell("lock acquires"); req == "" || req != acq {
		t.Errorf("redis mode: %s requests but %s lock acquires on the nodes' /metrics", req, acq)
	}
	// The write limit (4, the default): the peak of order writes at once
	// across the nodes is at most 4, and every request took a permit but
	// the busy ones (on a loaded machine a few are: a user's order lock,
	// or a permit, not free within the 2s wait).
	if m := writePeakLine.FindStringSubmatch(stdout.String()); m == nil {
		t.Errorf("no write-limit line in the output")
	} else if n, _ := strconv.Atoi(m[1]); n < 1 || n > 4 || m[2] != "limit 4" {
		t.Errorf("%s: want a peak of 1 to 4 writes at once, limit 4", m[0])
	}
	req, _ := strconv.Atoi(cell("requests"))
	busy, _ := strconv.Atoi(cell("429 busy"))
	if m := permitsLine.FindStringSubmatch(stdout.String()); m == nil || cell("5xx") != "0" || m[1] != strconv.Itoa(req-busy) {
		t.Errorf("write permits line %q: want %d taken (one per request but the %d busy)", m, req-busy, busy)
	}
	chaos := chaosLine.FindAllStringSubmatch(stdout.String(), -1)
	if len(chaos) != 2 || chaos[0][1] != "fenced" || chaos[1][1] != "unfenced" {
		t.Fatalf("want chaos=fenced then chaos=unfenced lines, got %q", chaos)
	}
	if r := chaos[0]; r[2] != "20" || r[3] != "0" {
		t.Errorf("chaos, fenced: %s, want orders=20 duplicates=0", r[0])
	}
	if r := chaos[1]; r[3] == "0" {
		t.Errorf("control: chaos, unfenced: %s, want duplicates (the lock alone, when Redis forgets it)", r[0])
	}
	nodes := nodesLine.FindAllStringSubmatch(stderr.String(), -1)
	if len(nodes) != 2 {
		t.Fatalf("want 2 node lines on stderr, got %q", nodes)
	}
	for _, n := range nodes {
		assertClosed(t, strings.Fields(n[1]))
	}
}

// TestDemoInterrupt: Ctrl-C during the load stops the demo, its nodes and
// its Redis, and exits 130.
func TestDemoInterrupt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := seckillCmd(ctx, t, "demo", "-users", "100000", "-dup", "8", "-stock", "10")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var targets []string
	sc := bufio.NewScanner(stderr)
	sc.Split(scanLinesOrCR)
	for sc.Scan() {
		if m := nodesLine.FindStringSubmatch(sc.Text()); m != nil {
			targets = strings.Fields(m[1])
			break
		}
	}
	if len(targets) == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("demo never started its nodes")
	}
	go io.Copy(io.Discard, stderr)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("demo after SIGINT: %v, want exit status 130", err)
	}
	assertClosed(t, targets)
}

func assertClosed(t *testing.T, urls []string) {
	t.Helper()
	for _, u := range urls {
		host := strings.TrimPrefix(u, "http://")
		if c, err := net.DialTimeout("tcp", host, time.Second); err == nil {
			c.Close()
			t.Errorf("node %s still listening after the demo", u)
		}
	}
}

func scanLinesOrCR(data []byte, atEOF bool) (int, []byte, error) {
	for i, b := range data {
		if b == '\n' || b == '\r' {
			return i + 1, data[:i], nil
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

func tailOf(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

// TestServeTimeoutFlags: a bad -*-timeout flag stops serve before it
// listens, naming the flag.
func TestServeTimeoutFlags(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"-idle-timeout", "0s"}, "-idle-timeout"},
		{[]string{"-read-header-timeout", "-1s"}, "-read-header-timeout"},
		{[]string{"-read-timeout", "1s"}, "-read-header-timeout"}, // under the 2s header timeout
		{[]string{"-write-timeout", "2s"}, "-write-timeout"},      // not longer than -wait 2s
		{[]string{"-wait", "20s"}, "-write-timeout"},
	} {
		args := append([]string{"serve", "-lock", "none", "-db", db, "-addr", "127.0.0.1:0", "-grpc-addr", ""}, c.args...)
		out, err := seckillCmd(context.Background(), t, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.flag) {
			t.Errorf("serve %v: %v %s; want a failure naming %s", c.args, err, out, c.flag)
		}
	}
}
