package bench

import (
	"fmt"
	"strings"
	"time"
)

// A goal is one of the lean path's targets, judged on this run's figures:
// met, missed (with the measured reason and what would close it, written
// from the profiles and A/B runs of docs/performance.md), or not run.
type goal struct {
	target string
	figure string // what this run measured; "" when a row it needs was not run
	met    bool
	why    string // for a missed goal: the measured reason, what would close it
}

// singlePeers are the peers on one server that lockgate is held against.
var singlePeers = []string{"redislock", "redsync", "rueidislock", "rueidislock/tuned"}

func (r *Report) unc(name string, conc int) *uncJob {
	for _, j := range r.Uncontended {
		if j.peer.name == name && j.conc == conc && len(j.runs) > 0 {
			return j
		}
	}
	return nil
}

func (r *Report) con(name string, hold time.Duration) *conJob { return r.conKeys(name, hold, 1) }

func (r *Report) namesOf(name string) *namesResult {
	for _, j := range r.Names {
		if j.peer.name == name && len(j.runs) > 0 {
			return &j.runs[0]
		}
	}
	return nil
}

// ratio is the median × floor of an uncontended job (1 for the floor).
func (j *uncJob) ratioMed() float64 {
	if j.floor == nil {
		return 1
	}
	return spreadOf(j.ratio).Med
}

func (j *uncJob) med(f func(uncResult) float64) float64 { return spreadOf(collect(j.runs, f)).Med }

func (j *conJob) med(f func(conResult) float64) float64 { return spreadOf(collect(j.runs, f)).Med }

// aheadOfPeers reports whether lockgate's × floor at conc is at least every
// single-server peer's, and says the figures.
func (r *Report) aheadOfPeers(conc int) (string, bool) {
	lg := r.unc("lockgate", conc)
	if lg == nil {
		return "", false
	}
	ok := true
	parts := []string{fmt.Sprintf("lockgate %.2f", lg.ratioMed())}
	for _, name := range singlePeers {
		if p := r.unc(name, conc); p != nil {
			parts = append(parts, fmt.Sprintf("%s %.2f", name, p.ratioMed()))
			ok = ok && lg.ratioMed() >= p.ratioMed()
		}
	}
	return strings.Join(parts, ", "), ok
}

func (r *Report) goals() []goal {
	var gs []goal
	add := func(target, figure string, met bool, why string) {
		gs = append(gs, goal{target: target, figure: figure, met: met, why: why})
	}
	if fig, ahead := r.aheadOfPeers(1); fig != "" {
		lg := r.unc("lockgate", 1).ratioMed()
		add("uncontended, 1 caller: ≥ 0.9× the floor and ≥ every peer", fig+" (× floor)", lg >= 0.9 && ahead,
			"a cycle is one script call (the acquire) and one HDEL (the release of a lean hold: the lock hash's one field, named by its owner), against the floor's SET and one-command script. The acquire's script call costs Redis 3.1–3.5 µs before its first command (a script that only returns, with the acquire's keys and arguments: docs/performance.md), and the fence (TIME, SET…GET of the slot's floor), the check for a queue or done marker (EXISTS) and the hash's HSET and PEXPIRE add about 4.6 µs: at one caller every µs of the server is on the caller's path. What would close it: an acquire without a script, which would drop the fence or the queue check the README promises (Redis 7.0 has no command that takes a lock and issues a fence).")
	}
	for _, conc := range []int{16, 64} {
		if fig, ahead := r.aheadOfPeers(conc); fig != "" {
			add(fmt.Sprintf("uncontended, %d callers: ≥ every peer, rueidislock tuned included", conc), fig+" (× floor)", ahead,
				"at 16 and more callers the server's time a cycle sets the pace: each lockgate cycle costs the server more than a peer's (the server µs and CPU columns), the acquire's script, as above, and rueidislock pipelines every caller's commands over one connection. At 16 nothing is saturated (Redis about 58% of a core, the client 84%), and cycles a second follow the server's µs a cycle across the floor, redislock and lockgate; coalescing on or off and its round trips in flight change nothing there (docs/performance.md, \"What limits 16 callers\"). go-redis's own auto-pipelining was measured for the scripts and did not beat lockgate's coalescer (docs/performance.md); what would close it is an acquire without a script, as above.")
		}
	}
	if lg, fl := r.unc("lockgate", 1), r.unc("floor", 1); lg != nil && fl != nil {
		cmds := lg.med(func(x uncResult) float64 { return x.ServerCmds })
		add("≤ 6 server commands per uncontended cycle", fmt.Sprintf("lockgate %.1f, floor %.1f", cmds, fl.med(func(x uncResult) float64 { return x.ServerCmds })), cmds <= 6,
			"1 EVALSHA and 5 inside it: EXISTS (lock, done marker, queue), TIME and SET…GET for the fence (a server-clock fence survives failovers and empty restarts, which a counter alone does not), HSET and PEXPIRE of the hash; then the release's HDEL. A string lock value would save one command but no server time (HSET and PEXPIRE cost 1.46 µs, one SET … PX about as much), and would lose the release by HDEL, which needs the owner as a field's name; Redis 7.0 has no single command for the rest.")
		us, fus := lg.med(func(x uncResult) float64 { return x.ServerTime }), fl.med(func(x uncResult) float64 { return x.ServerTime })
		add("≤ 2× the floor's server time per uncontended cycle (INFO commandstats µs)", fmt.Sprintf("lockgate %.1f µs, floor %.1f µs (%.2f×)", us, fus, us/max(fus, 0.001)), us <= 2*fus,
			"the acquire's script call costs 3.1–3.5 µs before its first command (a script that only returns, with the same keys and arguments), and the commands inside add about 4.6 µs (SET…GET 1.72, EXISTS 1.27, HSET 0.78, PEXPIRE 0.68, TIME 0.17), where the floor's whole cycle is about 5 µs; the release's HDEL costs about what the floor's SET does. What would close it: an acquire without a script, as above. (Counted by the servers' whole CPU time, INFO cpu, which network I/O dominates, the ratio is smaller: the server CPU column.)")
	}
	if lg, rl := r.unc("lockgate", 1), r.unc("redislock", 1); lg != nil && rl != nil {
		a, b := lg.med(func(x uncResult) float64 { return x.Allocs }), rl.med(func(x uncResult) float64 { return x.Allocs })
		add("allocations per uncontended cycle ≤ redislock's", fmt.Sprintf("lockgate %.1f, redislock %.1f", a, b), a <= b,
			"the lock's key names boxed for the scripts (6), the owner (3, its id the tail of its done marker's name), the acquisition, the lease and its context (5), each call's command, arguments and bounding context (3 a call; the deadline's timer and channel are shared by the calls of a 5ms slot: docs/internals.md, \"Bounded calls\"); on a client without ContextTimeoutEnabled each call also needs a context.WithDeadline and a goroutine of its own (lockgate/no-ctx-timeout). What would close it: key names kept boxed with the name, which costs reading for one or two allocations.")
	}
	if lg, fl := r.namesOf("lockgate"), r.namesOf("floor"); lg != nil && fl != nil {
		add("what released locks leave is bounded by the deployment, not the names", fmt.Sprintf("%s names: lockgate %d keys, %+.2f MB; floor %d keys, %+.2f MB", fmtRate(float64(lg.Names)), lg.Keys, float64(lg.Memory)/(1<<20), fl.Keys, float64(fl.Memory)/(1<<20)), lg.Keys <= 16384, "")
		flat := lg.Late / lg.Early
		add("cost flat from 1 k to all names: late ÷ early within 10 %", fmt.Sprintf("lockgate %.2f", flat), flat >= 0.9 && flat <= 1.1,
			"read it with the floor's own late ÷ early in the names table: on a shared machine one run's noise is of the same size.")
	}
	if lg, held := r.unc("lockgate", 1), r.unc("lockgate/held=10k", 1); lg != nil && held != nil {
		a, b := lg.ratioMed(), held.ratioMed()
		add("cost flat with 10 k leases held: within 10 %", fmt.Sprintf("× floor %.2f alone, %.2f with 10 k held", a, b), b >= 0.9*a,
			"the watchdog's batches share the machine's two cores with the callers; read it with the c=1 rows' min–max.")
	}
	if c := r.con("lockgate", 2*time.Millisecond); c != nil {
		ratio := c.med(func(x conResult) float64 { return x.Ratio })
		fair := c.med(func(x conResult) float64 { return float64(x.MinG) / float64(max(x.MaxG, 1)) })
		past := sumInts(c.runs, func(x conResult) int64 { return x.PastBudget })
		add("contended, 2 ms holds: ≥ 0.9× ideal, fairness ≥ 0.8, 0 past budget", fmt.Sprintf("%.2f× ideal (%.2f with the hold as slept), fairness %.2f, %d past budget", ratio, c.med(func(x conResult) float64 { return x.RatioActual }), fair, past),
			ratio >= 0.9 && fair >= 0.8 && past == 0,
			"time.Sleep(2ms) overshoots (the real-hold column: the ideal counts 2ms), and a handoff is the release script, its message on the lock's channel and the waiter's wake-up, as at 0 ms.")
	}
	if c := r.con("lockgate", 0); c != nil {
		ratio := c.med(func(x conResult) float64 { return x.Ratio })
		add("contended, 0 ms holds: ≥ 0.5× ideal", fmt.Sprintf("%.2f× ideal", ratio), ratio >= 0.5,
			"the ideal is one handoff per PING round trip; each handoff here is a release script, a Pub/Sub message and the waiter's goroutine waking on a 2-core machine shared with 32 goroutines and the server. A hand-over inside the process to a waiter of the same Locker, told by the release's reply instead of the message, would come no sooner: the message reaches the process first, a median 7–10µs before the reply (docs/performance.md). What is left is scheduling: each handoff wakes the releasing goroutine, the Pub/Sub reader and the waiter, on 2 cores.")
	}
	if c := r.con("lockgate", 2*time.Millisecond); c != nil {
		cmds := c.med(func(x conResult) float64 { return perAcq(x.Server.total(), x.Acq) })
		add("≤ 10 server commands per contended acquisition", fmt.Sprintf("%.1f", cmds), cmds <= 10,
			"a contended acquisition is a queueing acquire (the lock's checks, TIME, ZADD, HSET and a read of the queue's expiry) and a handing-over release (ZRANGE, HMGET, ZREM, HDEL of the head, a fence's TIME and SET…GET, the new holder's HSET and PEXPIREAT, SPUBLISH), each command counted inside its script (the top-commands table). What would close it: the queue's entries and their expiry in one key instead of a sorted set, a hash and two expiries.")
	}
	if lg, rs := r.unc("lockgate/redlock3", 1), r.unc("redlock3", 1); lg != nil && rs != nil {
		a, b := lg.ratioMed(), rs.ratioMed()
		add("Redlock of 3, 1 caller: ≥ redsync's redlock3, fences kept", fmt.Sprintf("lockgate/redlock3 %.2f, redlock3 %.2f (× floor)", a, b), a >= b,
			"both make two parallel round trips (a third, to raise the fence floors, only when the majority's fences differ), but lockgate's cost the servers more: the acquire script with its fence and queue checks on every node, against SET NX, and, in this benchmark, a release script with a done marker on the node whose acquire answer is still out, against a compare-and-delete (server commands and µs per cycle in the table above). A release is one HDEL on each node whose acquire has answered; with nothing done inside the lock the third answer is mostly still on its way when Unlock begins (with 200µs of work inside, every release was lean on every node: docs/performance.md). What would close it: an acquire without a script on each node, which would give up the fence or the queue check, as for one server.")
	}
	return gs
}

// goalsTable renders the goals, each met or missed on this run's figures.
func (r *Report) goalsTable() string {
	gs := r.goals()
	if len(gs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Goals of the lean path, judged on this run\n\n| goal | this run | met | if not: the measured reason, what would close it |\n|---|---|---|---|\n")
	for _, g := range gs {
		met, why := "yes", ""
		if !g.met {
			met, why = "**no**", g.why
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.target, g.figure, met, why)
	}
	return b.String()
}
