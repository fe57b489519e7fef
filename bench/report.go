package bench

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Markdown renders the report: the machine and versions, how every locker
// is configured and waits, then the uncontended, contended and middleware
// tables (medians over repetitions, min–max in parentheses).
func (r *Report) Markdown() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "# lockgate benchmarks\n\n")
	fmt.Fprintf(&b, "- date: %s (took %v)\n", r.Started.Format(time.RFC3339), r.Took.Round(time.Second))
	fmt.Fprintf(&b, "- cores: runtime.NumCPU %d, GOMAXPROCS %d; %s\n", r.NumCPU, r.GOMAXPROCS, r.GoVersion)
	cluster := ""
	if r.usesCluster() {
		cluster = fmt.Sprintf(", and a Redis Cluster of %d masters (no replicas) for the rows named …/cluster", clusterMasters)
	}
	fmt.Fprintf(&b, "- redis-server %s, %d independent servers on 127.0.0.1 started for the run%s\n", r.RedisVersion, nServers, cluster)
	fmt.Fprintf(&b, "- command: `%s`\n", c.CommandLine)
	fmt.Fprintf(&b, "- %d reps per configuration, interleaved; uncontended and middleware runs %v (after %v warm-up), contended runs %v\n",
		c.Reps, c.Duration, c.warm(), c.Contended)
	fmt.Fprintf(&b, "- versions: %s\n", r.versionLine())
	if v, where := r.violations(); v > 0 {
		fmt.Fprintf(&b, "\n**MUTUAL EXCLUSION VIOLATED: %d acquisitions found another holder inside the critical section (%s; see the contended table).**\n", v, strings.Join(where, ", "))
	}

	b.WriteString("\n## Lockers\n\n| locker | configuration | how it waits |\n|---|---|---|\n")
	for _, p := range r.Peers {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", p.name, p.config, p.waits)
	}

	if len(r.Uncontended) > 0 {
		b.WriteString("\n" + r.uncontendedTable())
	}
	if len(r.Contended) > 0 {
		b.WriteString("\n" + r.contendedTable())
	}
	if c := r.clusterTable(); c != "" {
		b.WriteString("\n" + c)
	}
	if len(r.ReadHeavy) > 0 {
		b.WriteString("\n" + r.readHeavyTable())
	}
	if len(r.Names) > 0 {
		b.WriteString("\n" + r.namesTable())
	}
	if len(r.Middleware) > 0 {
		b.WriteString("\n" + r.middlewareTable())
	}
	if g := r.goalsTable(); g != "" {
		b.WriteString("\n" + g)
	}
	b.WriteString("\n" + notes)
	return b.String()
}

// Tables is the tables alone (and the goals judged on them), for the terminal.
func (r *Report) Tables() string {
	var parts []string
	if len(r.Uncontended) > 0 {
		parts = append(parts, r.uncontendedTable())
	}
	if len(r.Contended) > 0 {
		parts = append(parts, r.contendedTable())
	}
	if c := r.clusterTable(); c != "" {
		parts = append(parts, c)
	}
	if len(r.ReadHeavy) > 0 {
		parts = append(parts, r.readHeavyTable())
	}
	if len(r.Names) > 0 {
		parts = append(parts, r.namesTable())
	}
	if len(r.Middleware) > 0 {
		parts = append(parts, r.middlewareTable())
	}
	if g := r.goalsTable(); g != "" {
		parts = append(parts, g)
	}
	return strings.Join(parts, "\n")
}

const notes = `## Definitions

- **floor**: SET key tok NX PX, then an EVALSHA compare-and-delete, through go-redis, on a distinct key per cycle: two round trips, the least any safe Redis lock can cost.
- **uncontended**: each goroutine cycles lock then unlock on a key of its own, new every cycle, on one instance (one client) of the locker. × floor is the cycles/s ratio to the floor at the same concurrency in the same repetition (median, min–max). allocs/cycle is runtime.MemStats.Mallocs over the run ÷ cycles (everything in the process, including one allocation of the harness per cycle for the key string). keys left/cycle: keys on the server right after the run ÷ cycles (warm-up included): what the lock leaves behind (lockgate: the fence floors of the Cluster slots its names fell in, one key per slot, at most 16384 whatever the number of names, so the figure falls as runs grow; a done marker only after a call that went unanswered; lockgate/held=N: its N leases too). Before every run (of any benchmark) the servers are emptied (FLUSHALL SYNC) and the Go heap collected, outside the measurement, so no run pays for the expiries or garbage of an earlier one. On this 2-core machine a single caller's round trip is bimodal from run to run (the same two-round-trip cycle at ~55µs or ~140µs, depending on where client and server get scheduled), so c=1 rows are noisy: read them with their min–max.
- **contended**: 32 goroutines over 3 instances of the locker (3 nodes, each with its own clients; goroutine g uses node g mod 3), one key, a wait budget of 2s per attempt, the hold (time.Sleep) inside the lock. keys 8: the same 32 goroutines on 8 keys at once, goroutine g on key g mod 8 (4 goroutines a key, over all 3 instances; on the Cluster the 8 keys fall on every master). A handoff is an acquisition by another goroutine than the key's previous holder. × ideal is handoffs/s ÷ keys/(hold + RTT), with RTT the median PING round trip measured before the run; "real hold" uses the hold as it really lasted (time.Sleep(2ms) overshoots). Per goroutine and per Locker: the fewest and most acquisitions. past budget: waits that ended busy at the 2s budget, summed over reps. client cmds/acq: every RESP command the locker's clients wrote on their connections (pipelined, Pub/Sub and handshakes included) ÷ acquisitions; hook: what a go-redis hook saw (no Pub/Sub; — for rueidis, which has no go-redis hook). server cmds/acq: the INFO commandstats delta of the servers used (the Cluster's masters for …/cluster; calls summed, INFO excluded; commands a script runs count too) ÷ acquisitions. wait: from the call to the acquisition, successful ones. violations: acquisitions that found another holder still inside (an atomic counter), summed over reps; any is a broken lock.
- **defaults and tuned**: redislock's default is no retry, which under contention just fails, so its contended "default" is the retry of its README example (LinearBackoff 100ms within a 2s context) and "tuned" a fixed 2ms; redsync's are its NewMutex defaults and WithTries/WithRetryDelay 2ms; rueidislock's are NewLocker defaults and its README's single-instance advice. 2ms was the best fixed delay of a sweep (0.5–20ms) on the development machine. Every contended waiter of every locker has a 2s budget (lockgate: WithWait, the peers: a context deadline).
- **read-heavy**: 32 goroutines over 3 lockgate Lockers on one name for the contended run's length, each cycle a reader 9 times in 10 and a writer once (the same draw in both configurations), holding 2ms (time.Sleep); shared takes a reader's cycle with RLock and a writer's with Lock, exclusive takes every cycle with Lock. cycles/s, reads/s and writes/s are medians over the repetitions; writer wait is a successful Lock's time to return (the worst p50, p99 and max over the repetitions); writes past budget are writers busy at the 2s budget (a starved writer would show here); violations count a writer inside with anyone, or a reader with a writer.
- **distinct names**: 16 goroutines lock and release each of N distinct names once, in order, on one instance of the locker, after FLUSHALL (one run per locker, not repeated). cycles/s early is over the 50 000 cycles after the first 1 000 names, late over the last 50 000 (a tenth of the run each when it is shorter): a lock whose cost grows with the names locked before shows late ÷ early below 1, and more server CPU late than early (server CPU: used_cpu_user + used_cpu_sys of INFO cpu over the same cycles ÷ cycles, read at the window's first and last cycle: the measure a shared machine's scheduling moves least). Redis memory after: used_memory after the run minus before it (allocator noise of ±0.1 MB); keys left: what stays in Redis after every lock was released (lockgate: one fence floor per Cluster slot its names fell in, at most 16384, each expiring 10 minutes after that slot's last lock).
- **middleware**: 32 concurrent HTTP clients in the process, one request at a time each; distinct: a new key per request; hot: one key for all. × plain is req/s ÷ the plain route's in the same repetition. Status codes and errors are summed over reps.
`

func (r *Report) versionLine() string {
	mods := []string{"github.com/lockgate/lockgate", "github.com/redis/go-redis/v9", "github.com/bsm/redislock",
		"github.com/go-redsync/redsync/v4", "github.com/redis/rueidis", "github.com/gofiber/fiber/v2"}
	var out []string
	for _, m := range mods {
		v := r.Versions[m]
		if v == "" {
			v = "?"
		}
		out = append(out, m+" "+v)
	}
	return strings.Join(out, ", ")
}

// violations sums the contended runs' violations, and names the lockers
// and configurations that had any, with their counts.
func (r *Report) violations() (int64, []string) {
	var n int64
	var where []string
	for _, j := range r.Contended {
		if v := sumInts(j.runs, func(x conResult) int64 { return x.Violations }); v > 0 {
			n += v
			where = append(where, fmt.Sprintf("%s, %d key(s), hold %v: %d", j.peer.name, j.keys, j.hold, v))
		}
	}
	return n, where
}

func (r *Report) uncontendedTable() string {
	var b strings.Builder
	b.WriteString("## Uncontended (distinct key per cycle per goroutine)\n\n")
	b.WriteString("| locker | conc | cycles/s | × floor | p50 | p99 | allocs/cycle | keys left/cycle | server cmds/cycle | server µs/cycle | server CPU µs/cycle | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, j := range r.Uncontended {
		if len(j.runs) == 0 {
			continue
		}
		rate := spreadOf(collect(j.runs, func(x uncResult) float64 { return x.Rate }))
		ratio := "1"
		if j.floor != nil {
			ratio = fmtRatioSpread(spreadOf(j.ratio))
		}
		errs := sumInts(j.runs, func(x uncResult) int64 { return x.Errors })
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %.1f | %.2f | %.2f | %.1f | %.1f | %s |\n", j.peer.name, j.conc,
			fmtRateSpread(rate), ratio,
			fmtDur(medDur(collect(j.runs, func(x uncResult) float64 { return float64(x.P50) }))),
			fmtDur(medDur(collect(j.runs, func(x uncResult) float64 { return float64(x.P99) }))),
			spreadOf(collect(j.runs, func(x uncResult) float64 { return x.Allocs })).Med,
			spreadOf(collect(j.runs, func(x uncResult) float64 { return x.KeysLeft })).Med,
			spreadOf(collect(j.runs, func(x uncResult) float64 { return x.ServerCmds })).Med,
			spreadOf(collect(j.runs, func(x uncResult) float64 { return x.ServerTime })).Med,
			spreadOf(collect(j.runs, func(x uncResult) float64 { return x.ServerCPU })).Med,
			errCell(errs, firstUnc(j.runs)))
	}
	return b.String()
}

func (r *Report) contendedTable() string {
	var b strings.Builder
	b.WriteString("## Contended (32 goroutines, 3 Lockers; one key, or 8 keys at once)\n\n")
	b.WriteString("| locker | keys | hold | acq/s | handoffs/s | × ideal | × ideal (real hold) | per goroutine min/max | per Locker min/max | past budget | client cmds/acq | hook cmds/acq | server cmds/acq | wait p50 | wait p99 | RTT | violations | errors |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, j := range r.Contended {
		if len(j.runs) == 0 {
			continue
		}
		med := func(f func(conResult) float64) float64 { return spreadOf(collect(j.runs, f)).Med }
		viol := sumInts(j.runs, func(x conResult) int64 { return x.Violations })
		violCell := "0"
		if viol > 0 {
			violCell = fmt.Sprintf("**%d VIOLATIONS**", viol)
		}
		wire := "—"
		if allOf(j.runs, func(x conResult) bool { return x.WireOK }) {
			wire = fmt.Sprintf("%.2f", med(func(x conResult) float64 { return perAcq(x.Wire, x.Acq) }))
		}
		hook := "—"
		if allOf(j.runs, func(x conResult) bool { return x.Hooked }) {
			hook = fmt.Sprintf("%.2f", med(func(x conResult) float64 { return perAcq(x.Hook, x.Acq) }))
		}
		errs := sumInts(j.runs, func(x conResult) int64 { return x.OtherErrs + x.ReleaseErrs })
		fmt.Fprintf(&b, "| %s | %d | %v | %s | %s | %s | %s | %.0f / %.0f | %.0f / %.0f | %d | %s | %s | %.2f | %s | %s | %s | %s | %s |\n",
			j.peer.name, j.keys, j.hold,
			fmtRate(med(func(x conResult) float64 { return x.AcqRate })),
			fmtRateSpread(spreadOf(collect(j.runs, func(x conResult) float64 { return x.HandoffRate }))),
			fmtRatioSpread(spreadOf(collect(j.runs, func(x conResult) float64 { return x.Ratio }))),
			fmtRatio(med(func(x conResult) float64 { return x.RatioActual })),
			med(func(x conResult) float64 { return float64(x.MinG) }), med(func(x conResult) float64 { return float64(x.MaxG) }),
			med(func(x conResult) float64 { return float64(x.MinL) }), med(func(x conResult) float64 { return float64(x.MaxL) }),
			sumInts(j.runs, func(x conResult) int64 { return x.PastBudget }),
			wire, hook,
			med(func(x conResult) float64 { return perAcq(x.Server.total(), x.Acq) }),
			fmtDur(medDur(collect(j.runs, func(x conResult) float64 { return float64(x.WaitP50) }))),
			fmtDur(medDur(collect(j.runs, func(x conResult) float64 { return float64(x.WaitP99) }))),
			fmtDur(medDur(collect(j.runs, func(x conResult) float64 { return float64(x.RTT) }))),
			violCell, errCell(errs, firstCon(j.runs)))
	}
	b.WriteString("\nTop server commands per acquisition (all reps together):\n\n| locker | keys | hold | commands |\n|---|---:|---:|---|\n")
	for _, j := range r.Contended {
		total := cmdStats{}
		var acq int64
		for _, x := range j.runs {
			for k, v := range x.Server {
				total[k] += v
			}
			acq += x.Acq
		}
		var parts []string
		for _, name := range total.top(5) {
			parts = append(parts, fmt.Sprintf("%s %.2f", name, perAcq(total[name], acq)))
		}
		fmt.Fprintf(&b, "| %s | %d | %v | %s |\n", j.peer.name, j.keys, j.hold, strings.Join(parts, ", "))
	}
	return b.String()
}

func (r *Report) middlewareTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Middleware (%d HTTP clients)\n\n", r.Config.HTTPClients)
	b.WriteString("| framework | route | keys | req/s | × plain | p50 | p99 | status codes | errors |\n|---|---|---|---:|---:|---:|---:|---|---:|\n")
	for _, j := range r.Middleware {
		if len(j.runs) == 0 {
			continue
		}
		keys := map[string]string{"plain": "— (no lock)", "locked": "distinct", "locked-hot": "one hot key"}[j.route]
		ratio := "1"
		if j.plain != nil {
			var xs []float64
			for i, x := range j.runs {
				if i < len(j.plain.runs) && j.plain.runs[i].Rate > 0 {
					xs = append(xs, x.Rate/j.plain.runs[i].Rate)
				}
			}
			ratio = fmtRatioSpread(spreadOf(xs))
		}
		status := map[int]int64{}
		var errs int64
		first := ""
		for _, x := range j.runs {
			for k, v := range x.Status {
				status[k] += v
			}
			errs += x.Errors
			if first == "" {
				first = x.FirstErr
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", j.framework, j.route, keys,
			fmtRateSpread(spreadOf(collect(j.runs, func(x mwResult) float64 { return x.Rate }))), ratio,
			fmtDur(medDur(collect(j.runs, func(x mwResult) float64 { return float64(x.P50) }))),
			fmtDur(medDur(collect(j.runs, func(x mwResult) float64 { return float64(x.P99) }))),
			statusText(status), errCell(errs, first))
	}
	return b.String()
}

func statusText(m map[int]int64) string {
	if len(m) == 0 {
		return "—"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func errCell(n int64, first string) string {
	if n == 0 {
		return "0"
	}
	if len(first) > 80 {
		first = first[:80] + "…"
	}
	return fmt.Sprintf("%d (%s)", n, strings.ReplaceAll(first, "|", "/"))
}

func firstUnc(rs []uncResult) string {
	for _, x := range rs {
		if x.FirstErr != "" {
			return x.FirstErr
		}
	}
	return ""
}

func firstCon(rs []conResult) string {
	for _, x := range rs {
		if x.FirstErr != "" {
			return x.FirstErr
		}
	}
	return ""
}

func allOf[T any](xs []T, f func(T) bool) bool {
	for _, x := range xs {
		if !f(x) {
			return false
		}
	}
	return true
}

func perAcq(n, acq int64) float64 { return float64(n) / float64(max(acq, 1)) }

func medDur(xs []float64) time.Duration { return time.Duration(spreadOf(xs).Med) }

// fmtRate writes a rate with thousands separated by a thin space.
func fmtRate(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ' ')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func fmtRateSpread(s spread) string {
	if s.N <= 1 {
		return fmtRate(s.Med)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtRate(s.Med), fmtRate(s.Min), fmtRate(s.Max))
}

func fmtRatio(v float64) string { return fmt.Sprintf("%.2f", v) }

func fmtRatioSpread(s spread) string {
	if s.N == 0 {
		return "—"
	}
	if s.N == 1 {
		return fmtRatio(s.Med)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", s.Med, s.Min, s.Max)
}

// fmtDur writes µs below 10ms, ms with one decimal below 10s, else s.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
}
