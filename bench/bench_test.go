package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp (under Fiber) refreshes its cached Date header in a
		// goroutine started once per process and never stopped.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// fasthttp's worker-pool cleaner notices the server's Stop only
		// after its sleep of MaxIdleWorkerDuration (10s), then returns.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	)
}

// TestSmoke runs every configuration once in quick mode (150ms each) on its
// own redis-servers and checks that each measured something real: every
// locker made progress, mutual exclusion held, no call failed, the floor is
// positive, and the report has a row for every configuration.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-servers and runs every configuration")
	}
	// (A loaded machine, running other modules' tests beside it, has taken
	// over 3 minutes.)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{Quick: true, CommandLine: "go test"})
	if err != nil {
		t.Fatal(err)
	}

	var uncPeers, conPeers, manyKeys int
	for _, p := range rep.Peers {
		if p.uncontended {
			uncPeers++
		}
		if p.contended {
			conPeers++
		}
		if p.contended && p.manyKeys {
			manyKeys++
		}
	}
	if want := uncPeers * len(uncontendedConc); len(rep.Uncontended) != want {
		t.Errorf("%d uncontended configurations, want %d", len(rep.Uncontended), want)
	}
	if want := (conPeers + manyKeys*(len(contendedKeys)-1)) * len(contendedHolds); len(rep.Contended) != want {
		t.Errorf("%d contended configurations, want %d", len(rep.Contended), want)
	}
	if want := len(mwFrameworks) * len(mwRoutes); len(rep.Middleware) != want {
		t.Errorf("%d middleware configurations, want %d", len(rep.Middleware), want)
	}

	md := rep.Markdown()
	row := func(cells ...any) {
		t.Helper()
		s := "|"
		for _, c := range cells {
			s += fmt.Sprintf(" %v |", c)
		}
		if !strings.Contains(md, s) {
			t.Errorf("report has no row starting %q", s)
		}
	}
	for _, j := range rep.Uncontended {
		if len(j.runs) != 1 {
			t.Errorf("%s: %d runs, want 1", j.name, len(j.runs))
			continue
		}
		r := j.runs[0]
		if r.Cycles == 0 || r.Rate <= 0 || r.P50 <= 0 {
			t.Errorf("%s: no progress: %+v", j.name, r)
		}
		if r.Errors > 0 {
			t.Errorf("%s: %d errors, first %s", j.name, r.Errors, r.FirstErr)
		}
		if j.floor != nil && (len(j.ratio) != 1 || j.ratio[0] <= 0) || j.floor == nil && !strings.HasPrefix(j.peer.name, "floor") {
			t.Errorf("%s: ratio to the floor %v", j.name, j.ratio)
		}
		row(j.peer.name, j.conc)
	}
	for _, j := range rep.Contended {
		if len(j.runs) != 1 {
			t.Errorf("%s: %d runs, want 1", j.name, len(j.runs))
			continue
		}
		r := j.runs[0]
		if r.Acq == 0 || r.MaxL == 0 || r.RTT <= 0 {
			t.Errorf("%s: no progress: %d acquisitions, RTT %v", j.name, r.Acq, r.RTT)
		}
		if r.Violations > 0 {
			t.Errorf("%s: %d mutual-exclusion violations", j.name, r.Violations)
		}
		if n := r.OtherErrs + r.ReleaseErrs; n > 0 {
			t.Errorf("%s: %d errors, first %s", j.name, n, r.FirstErr)
		}
		if r.Server.total() == 0 || !r.WireOK || r.Wire == 0 {
			t.Errorf("%s: commands not counted: server %v, wire %d (ok %v)", j.name, r.Server, r.Wire, r.WireOK)
		}
		row(j.peer.name, j.keys, j.hold)
	}
	// lockgate on the Cluster beside one server, every workload.
	row("uncontended, 1 caller: × the floor of its topology")
	for _, conc := range uncontendedConc[1:] {
		row(fmt.Sprintf("uncontended, %d callers: × the floor of its topology", conc))
	}
	for _, h := range contendedHolds {
		row(fmt.Sprintf("contended, one key, %v holds", h))
		row(fmt.Sprintf("contended, 8 keys, %v holds", h))
	}
	for _, j := range rep.Middleware {
		if len(j.runs) != 1 {
			t.Errorf("%s: %d runs, want 1", j.name, len(j.runs))
			continue
		}
		r := j.runs[0]
		if r.Requests == 0 || r.Status[200] == 0 {
			t.Errorf("%s: no request served: %+v", j.name, r)
		}
		if r.Errors > 0 {
			t.Errorf("%s: %d transport errors, first %s", j.name, r.Errors, r.FirstErr)
		}
		row(j.framework, j.route)
	}
	if len(rep.ReadHeavy) != len(readHeavyModes) {
		t.Errorf("%d read-heavy configurations, want %d", len(rep.ReadHeavy), len(readHeavyModes))
	}
	rates := map[string]float64{}
	for _, j := range rep.ReadHeavy {
		if len(j.runs) != 1 {
			t.Errorf("%s: %d runs, want 1", j.name, len(j.runs))
			continue
		}
		r := j.runs[0]
		rates[j.mode] = r.CycleRate
		if r.Reads == 0 || r.Writes == 0 {
			t.Errorf("%s: no progress: %d reads, %d writes", j.name, r.Reads, r.Writes)
		}
		if r.Violations > 0 {
			t.Errorf("%s: %d read-write violations", j.name, r.Violations)
		}
		if r.Errors > 0 {
			t.Errorf("%s: %d errors, first %s", j.name, r.Errors, r.FirstErr)
		}
	}
	if rates["shared"] <= rates["exclusive"] {
		t.Errorf("read-heavy: shared %.0f cycles/s, not above exclusive %.0f", rates["shared"], rates["exclusive"])
	}
	if len(rep.Names) != len(namesPeers) {
		t.Errorf("%d distinct-names runs, want %d", len(rep.Names), len(namesPeers))
	}
	for _, j := range rep.Names {
		if len(j.runs) != 1 {
			t.Errorf("%s: %d runs, want 1", j.name, len(j.runs))
			continue
		}
		r := j.runs[0]
		if r.Names != 20_000 || r.Early <= 0 || r.Late <= 0 || r.EarlyCPU <= 0 || r.LateCPU <= 0 {
			t.Errorf("%s: no progress: %+v", j.name, r)
		}
		if r.Errors > 0 {
			t.Errorf("%s: %d errors, first %s", j.name, r.Errors, r.FirstErr)
		}
		// The floor and redislock leave nothing; lockgate one fence floor
		// per slot at most.
		if limit := map[string]int64{"lockgate": 16384}[j.peer.name]; r.Keys > limit {
			t.Errorf("%s: %d keys left, want at most %d", j.name, r.Keys, limit)
		}
		row(j.peer.name, "20 000")
	}
	for _, want := range []string{"redis-server 7.", "## Uncontended", "## Contended", "## Middleware", "## Lockers", "## Distinct names", "## Read-heavy"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log("\n" + md)
	}
}

// TestOnly: -only keeps the matching configurations and brings the floor
// (uncontended) and the plain route (middleware) they are compared with.
func TestOnly(t *testing.T) {
	r := &Report{Config: Config{Only: "uncontended/lockgate/c=16"}, Peers: peers()}
	r.plan()
	var names []string
	for _, j := range r.Uncontended {
		names = append(names, j.name)
	}
	want := "uncontended/floor/c=16 uncontended/lockgate/c=16"
	if got := strings.Join(names, " "); got != want || len(r.Contended)+len(r.Middleware) != 0 {
		t.Errorf("plan %q (+%d contended, %d middleware), want %q", got, len(r.Contended), len(r.Middleware), want)
	}
	// lockgate and its variants (semaphore1, multi2, redlock3, cluster), at
	// every hold, and lockgate's and lockgate/cluster's runs on 8 keys; not
	// uncontended/lockgate
	r = &Report{Config: Config{Only: "contended/lockgate"}, Peers: peers()}
	r.plan()
	if len(r.Uncontended) != 0 || len(r.Contended) != (5+2)*len(contendedHolds) {
		t.Errorf("contended/lockgate: %d uncontended, %d contended", len(r.Uncontended), len(r.Contended))
	}
	r = &Report{Config: Config{Only: "fiber/locked-hot"}, Peers: peers()}
	r.plan()
	if len(r.Middleware) != 2 || r.Middleware[0].route != "plain" || r.Middleware[1].plain != r.Middleware[0] {
		t.Errorf("middleware plan %+v", r.Middleware)
	}
}

// TestRESPScanner: commands are counted across arbitrary write boundaries,
// and anything that is not RESP arrays of bulk strings marks the count
// broken.
func TestRESPScanner(t *testing.T) {
	stream := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$12\r\nab\r\ncd\r\n$*xy\r\n*1\r\n$4\r\nPING\r\n*0\r\n"
	for split := 1; split <= len(stream); split++ {
		var s respScanner
		var n int64
		for i := 0; i < len(stream); i += split {
			c, ok := s.scan([]byte(stream[i:min(i+split, len(stream))]))
			if !ok {
				t.Fatalf("split %d: broken", split)
			}
			n += c
		}
		if n != 3 {
			t.Fatalf("split %d: %d commands, want 3", split, n)
		}
	}
	var s respScanner
	if _, ok := s.scan([]byte("PING\r\n")); ok {
		t.Error("an inline command was not reported")
	}
}

// TestHist: quantiles are within the histogram's resolution.
func TestHist(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, time.Millisecond}} {
		got := h.quantile(c.q)
		if d := float64(got-c.want) / float64(c.want); d < -0.02 || d > 0.02 {
			t.Errorf("q%v = %v, want %v ± 2%%", c.q, got, c.want)
		}
	}
	for _, v := range []uint64{0, 1, 127, 128, 129, 1 << 20, 1<<40 + 12345, 1 << 62} {
		i := histIndex(v)
		got := uint64(histValue(i))
		if i >= histBuckets || (v >= 128 && (float64(got) < float64(v)*0.98 || float64(got) > float64(v)*1.02)) || (v < 128 && got != v) {
			t.Errorf("value %d: bucket %d, middle %d", v, i, got)
		}
	}
}

// The goals are judged on the run's own figures: a goal whose rows ran is
// met or missed (a missed one says why), a goal whose rows did not run is
// left out. Control: the same report with lockgate's one-caller ratio below
// 0.9 misses the first goal.
func TestGoals(t *testing.T) {
	floor := &uncJob{peer: peer{name: "floor"}, conc: 1, runs: []uncResult{{Allocs: 18, ServerCmds: 4, ServerTime: 10}}}
	job := func(name string, ratio, allocs, cmds, us float64) *uncJob {
		return &uncJob{peer: peer{name: name}, conc: 1, floor: floor, ratio: []float64{ratio},
			runs: []uncResult{{Allocs: allocs, ServerCmds: cmds, ServerTime: us}}}
	}
	report := func(lockgate float64) *Report {
		return &Report{Uncontended: []*uncJob{floor, job("lockgate", lockgate, 40, 9, 30), job("redislock", 0.85, 34, 5, 15), job("redsync", 0.8, 40, 4, 12)}}
	}
	row := func(table, target string) string {
		for _, line := range strings.Split(table, "\n") {
			if strings.HasPrefix(line, "| "+target) {
				return line
			}
		}
		return ""
	}
	table := report(0.95).goalsTable()
	for target, want := range map[string]string{
		"uncontended, 1 caller":                   "| yes |",
		"allocations per uncontended cycle":       "| **no** |",
		"≤ 6 server commands per uncontended":     "| **no** |",
		"≤ 2× the floor's server time per uncont": "| **no** |",
	} {
		if r := row(table, target); !strings.Contains(r, want) {
			t.Errorf("goal %q: row %q, want %q", target, r, want)
		}
	}
	if r := row(table, "allocations per uncontended cycle"); !strings.Contains(r, "lockgate 40.0, redislock 34.0") || !strings.Contains(r, "key names boxed") {
		t.Errorf("a missed goal names its figures and why: %q", r)
	}
	if r := row(table, "uncontended, 1 caller"); !strings.Contains(r, "lockgate 0.95, redislock 0.85, redsync 0.80") || !strings.HasSuffix(r, "| yes |  |") {
		t.Errorf("a met goal names its figures and no reason: %q", r)
	}
	for _, absent := range []string{"contended, 2 ms", "Redlock of 3", "uncontended, 16 callers", "what released locks leave"} {
		if r := row(table, absent); r != "" {
			t.Errorf("goal %q has no rows in this run, yet: %q", absent, r)
		}
	}
	if r := row(report(0.5).goalsTable(), "uncontended, 1 caller"); !strings.Contains(r, "| **no** |") {
		t.Errorf("control: lockgate at 0.5× the floor: %q, want missed", r)
	}
}

// A violation in any contended run heads the report, naming the locker and
// its configuration; a clean run's report has no such line.
func TestViolationsNamed(t *testing.T) {
	clean := &conJob{peer: peer{name: "lockgate"}, hold: 2 * time.Millisecond, keys: 1, runs: []conResult{{}, {}}}
	broken := &conJob{peer: peer{name: "rueidislock"}, hold: 2 * time.Millisecond, keys: 1, runs: []conResult{{}, {Violations: 1}}}
	r := &Report{Contended: []*conJob{clean}}
	if n, where := r.violations(); n != 0 || where != nil {
		t.Fatalf("clean runs: %d violations at %v", n, where)
	}
	r.Contended = append(r.Contended, broken)
	n, where := r.violations()
	if want := []string{"rueidislock, 1 key(s), hold 2ms: 1"}; n != 1 || !slices.Equal(where, want) {
		t.Fatalf("violations %d at %q, want 1 at %q", n, where, want)
	}
}
