package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// Default run lengths.
const (
	DefaultDuration  = time.Second
	DefaultContended = 5 * time.Second
)

// Config is one run of the benchmarks.
type Config struct {
	// Reps is how many times every configuration runs, interleaved with the
	// others (A B C A B C …). Default 5.
	Reps int
	// Duration is the measured length of one uncontended or middleware
	// run. Default 1s.
	Duration time.Duration
	// Contended is the length of one contended run. Default 5s.
	Contended time.Duration
	// Only keeps the configurations whose name contains one of its
	// comma-separated parts, starting at a segment of the name (names as
	// "uncontended/lockgate/c=16", "contended/redsync/tuned/hold=2ms",
	// "middleware/fiber/locked-hot": "contended/lockgate" selects the
	// contended runs only, "lockgate" both, "c=64" one concurrency); a
	// selected uncontended run brings the floor at its concurrency, a
	// middleware route the plain route of its framework. Empty: all.
	Only string
	// Quick is the smoke-test size: 1 rep of 150ms each (it overrides Reps,
	// Duration and Contended).
	Quick bool
	// Names is how many distinct names the names benchmark locks once
	// each, with the floor, lockgate and redislock, once per locker (not
	// repeated: a run of a million takes about a minute). Default
	// DefaultNames; 20 000 in Quick mode.
	Names int
	// HTTPClients is the load generator's number of concurrent clients.
	// Default 32.
	HTTPClients int
	// CommandLine is printed in the report.
	CommandLine string
	// Log receives progress lines (nil: none).
	Log io.Writer
}

func (c *Config) defaults() {
	if c.Quick {
		c.Reps, c.Duration, c.Contended = 1, 150*time.Millisecond, 150*time.Millisecond
		if c.Names <= 0 {
			c.Names = 20_000
		}
	}
	if c.Names <= 0 {
		c.Names = DefaultNames
	}
	if c.Reps <= 0 {
		c.Reps = 5
	}
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Contended <= 0 {
		c.Contended = DefaultContended
	}
	if c.HTTPClients <= 0 {
		c.HTTPClients = 32
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// warm is the unmeasured warm-up before an uncontended or middleware run.
func (c *Config) warm() time.Duration { return min(c.Duration/5, 100*time.Millisecond) }

// Report is everything a run measured.
type Report struct {
	Config       Config
	Started      time.Time
	Took         time.Duration
	NumCPU       int
	GOMAXPROCS   int
	GoVersion    string
	RedisVersion string
	Versions     map[string]string // module → version
	Peers        []peer
	Uncontended  []*uncJob
	Contended    []*conJob
	Middleware   []*mwJob
	Names        []*namesJob
	ReadHeavy    []*readHeavyJob
}

type uncJob struct {
	name string
	peer peer
	conc int
	runs []uncResult
	// ratio[i] is runs[i].Rate ÷ the floor's rate in the same repetition.
	ratio []float64
	floor *uncJob
}

type conJob struct {
	name string
	peer peer
	hold time.Duration
	keys int // contended keys: goroutine g takes key g mod keys
	runs []conResult
}

type mwJob struct {
	name             string
	framework, route string
	runs             []mwResult
	plain            *mwJob
}

// Run starts its redis-servers, runs the selected configurations and
// returns the report. It stops early, with what it has and ctx's error,
// when ctx ends.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	rep := &Report{
		Config: cfg, Started: time.Now(), NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion: runtime.Version(), Versions: moduleVersions(), Peers: peers(),
	}
	rep.plan()
	if len(rep.Uncontended)+len(rep.Contended)+len(rep.Middleware)+len(rep.Names)+len(rep.ReadHeavy) == 0 {
		return rep, fmt.Errorf("-only %q selects no configuration", cfg.Only)
	}
	e, err := startEnv(rep.usesCluster())
	if err != nil {
		return rep, err
	}
	defer e.close()
	rep.RedisVersion = e.redisVersion(ctx)
	fmt.Fprintf(cfg.Log, "bench: %d uncontended, %d contended, %d middleware configurations × %d reps, %d distinct-names runs of %d; about %v\n",
		len(rep.Uncontended), len(rep.Contended), len(rep.Middleware), cfg.Reps, len(rep.Names), cfg.Names, rep.estimate().Round(time.Second))

	err = rep.execute(ctx, e)
	rep.Took = time.Since(rep.Started)
	return rep, err
}

func (r *Report) selected(name string) bool {
	if r.Config.Only == "" {
		return true
	}
	for _, part := range strings.Split(r.Config.Only, ",") {
		if part = strings.TrimSpace(part); part != "" && (strings.HasPrefix(name, part) || strings.Contains(name, "/"+part)) {
			return true
		}
	}
	return false
}

// plan lists the configurations selected, in the order they run.
func (r *Report) plan() {
	for _, conc := range uncontendedConc {
		for _, cluster := range []bool{false, true} {
			r.planUncontended(conc, cluster)
		}
	}
	for _, p := range r.Peers {
		if !p.contended {
			continue
		}
		for _, keys := range contendedKeys {
			if keys > 1 && !p.manyKeys {
				continue
			}
			for _, h := range contendedHolds {
				name := fmt.Sprintf("contended/%s/hold=%v", p.name, h)
				if keys > 1 {
					name = fmt.Sprintf("contended/%s/keys=%d/hold=%v", p.name, keys, h)
				}
				if j := (&conJob{name: name, peer: p, hold: h, keys: keys}); r.selected(j.name) {
					r.Contended = append(r.Contended, j)
				}
			}
		}
	}
	for _, name := range namesPeers {
		for _, p := range r.Peers {
			if j := (&namesJob{name: "names/" + p.name, peer: p}); p.name == name && r.selected(j.name) {
				r.Names = append(r.Names, j)
			}
		}
	}
	for _, mode := range readHeavyModes {
		if j := (&readHeavyJob{name: "readheavy/lockgate/" + mode, mode: mode}); r.selected(j.name) {
			r.ReadHeavy = append(r.ReadHeavy, j)
		}
	}
	for _, fw := range mwFrameworks {
		var plain *mwJob
		var jobs []*mwJob
		for _, route := range mwRoutes {
			j := &mwJob{name: fmt.Sprintf("middleware/%s/%s", fw, route), framework: fw, route: route}
			if route == "plain" {
				plain = j
				continue
			}
			if r.selected(j.name) {
				jobs = append(jobs, j)
			}
		}
		if len(jobs) > 0 || r.selected(plain.name) {
			for _, j := range jobs {
				j.plain = plain
			}
			r.Middleware = append(r.Middleware, plain)
			r.Middleware = append(r.Middleware, jobs...)
		}
	}
}

// planUncontended plans the uncontended runs at conc of the
// configurations on one server (cluster false) or on the Cluster, each
// with the floor of its kind, when any is selected.
func (r *Report) planUncontended(conc int, cluster bool) {
	var floor *uncJob
	var jobs []*uncJob
	for _, p := range r.Peers {
		if !p.uncontended || p.cluster != cluster {
			continue
		}
		j := &uncJob{name: fmt.Sprintf("uncontended/%s/c=%d", p.name, conc), peer: p, conc: conc}
		if strings.HasPrefix(p.name, "floor") {
			floor = j
			continue
		}
		if r.selected(j.name) {
			jobs = append(jobs, j)
		}
	}
	if floor == nil || len(jobs) == 0 && !r.selected(floor.name) {
		return
	}
	for _, j := range jobs {
		j.floor = floor
	}
	r.Uncontended = append(r.Uncontended, floor)
	r.Uncontended = append(r.Uncontended, jobs...)
}

// usesCluster reports whether a planned configuration runs on the Cluster.
func (r *Report) usesCluster() bool {
	for _, j := range r.Uncontended {
		if j.peer.cluster {
			return true
		}
	}
	for _, j := range r.Contended {
		if j.peer.cluster {
			return true
		}
	}
	return false
}

// estimate is the planned measuring time plus a rough allowance for
// warm-ups and setup.
func (r *Report) estimate() time.Duration {
	c := r.Config
	per := time.Duration(len(r.Uncontended)+len(r.Middleware))*(c.Duration+c.warm()+30*time.Millisecond) +
		time.Duration(len(r.Contended)+len(r.ReadHeavy))*(c.Contended+50*time.Millisecond)
	// a distinct-names run: about 20 000 cycles/s
	names := time.Duration(len(r.Names)) * time.Duration(c.Names) * 50 * time.Microsecond
	return per*time.Duration(c.Reps) + names
}

// execute runs every phase, repetitions interleaved inside each phase.
func (r *Report) execute(ctx context.Context, e *env) error {
	c := r.Config
	for rep := range c.Reps {
		for _, j := range r.Uncontended {
			tag := j.name + ":" + strconv.Itoa(rep)
			if err := e.reset(ctx); err != nil {
				return fmt.Errorf("%s: reset: %w", j.name, err)
			}
			res, err := runUncontended(ctx, e, j.peer, j.conc, c.Duration, c.warm(), tag)
			if err != nil {
				return fmt.Errorf("%s: %w", j.name, err)
			}
			j.runs = append(j.runs, res)
			if j.floor != nil && len(j.floor.runs) == len(j.runs) {
				j.ratio = append(j.ratio, res.Rate/j.floor.runs[rep].Rate)
			}
			fmt.Fprintf(c.Log, "rep %d/%d %-45s %9.0f cycles/s p50 %-8v p99 %-8v %5.1f allocs%s\n", rep+1, c.Reps, j.name, res.Rate,
				res.P50.Round(time.Microsecond), res.P99.Round(time.Microsecond), res.Allocs, errNote(res.Errors, res.FirstErr))
		}
	}
	for rep := range c.Reps {
		for _, j := range r.Contended {
			tag := j.name + ":" + strconv.Itoa(rep)
			if err := e.reset(ctx); err != nil {
				return fmt.Errorf("%s: reset: %w", j.name, err)
			}
			res, err := runContended(ctx, e, j.peer, j.hold, j.keys, c.Contended, tag)
			if err != nil {
				return fmt.Errorf("%s: %w", j.name, err)
			}
			j.runs = append(j.runs, res)
			fmt.Fprintf(c.Log, "rep %d/%d %-45s %7.0f acq/s %7.0f handoffs/s ratio %.2f past-budget %d violations %d%s\n", rep+1, c.Reps, j.name,
				res.AcqRate, res.HandoffRate, res.Ratio, res.PastBudget, res.Violations, errNote(res.OtherErrs+res.ReleaseErrs, res.FirstErr))
		}
	}
	for rep := range c.Reps {
		for _, j := range r.ReadHeavy {
			if err := e.reset(ctx); err != nil {
				return fmt.Errorf("%s: reset: %w", j.name, err)
			}
			res, err := runReadHeavy(ctx, e, j.mode, c.Contended, j.mode+":"+strconv.Itoa(rep))
			if err != nil {
				return fmt.Errorf("%s: %w", j.name, err)
			}
			j.runs = append(j.runs, res)
			fmt.Fprintln(c.Log, readHeavyLine(rep, c.Reps, j, res))
		}
	}
	for _, j := range r.Names {
		if err := e.reset(ctx); err != nil {
			return fmt.Errorf("%s: reset: %w", j.name, err)
		}
		res, err := runNames(ctx, e, j.peer, c.Names, j.peer.name)
		if err != nil {
			return fmt.Errorf("%s: %w", j.name, err)
		}
		j.runs = append(j.runs, res)
		fmt.Fprintf(c.Log, "%-45s %d names: %7.0f cycles/s early, %7.0f late; server CPU %.1f µs/cycle early, %.1f late; memory %+.2f MB, %d keys left%s\n", j.name, res.Names,
			res.Early, res.Late, res.EarlyCPU, res.LateCPU, float64(res.Memory)/(1<<20), res.Keys, errNote(res.Errors, res.FirstErr))
	}
	for rep := range c.Reps {
		for _, j := range r.Middleware {
			tag := strings.ReplaceAll(j.name, "/", "-") + "-" + strconv.Itoa(rep)
			if err := e.reset(ctx); err != nil {
				return fmt.Errorf("%s: reset: %w", j.name, err)
			}
			res, err := runMiddleware(ctx, e, j.framework, j.route, c.HTTPClients, c.Duration, c.warm(), tag)
			if err != nil {
				return fmt.Errorf("%s: %w", j.name, err)
			}
			j.runs = append(j.runs, res)
			fmt.Fprintf(c.Log, "rep %d/%d %-45s %7.0f req/s p50 %-8v p99 %-8v %s%s\n", rep+1, c.Reps, j.name, res.Rate,
				res.P50.Round(time.Microsecond), res.P99.Round(time.Microsecond), statusText(res.Status), errNote(res.Errors, res.FirstErr))
		}
	}
	return nil
}

func errNote(n int64, first string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" ERRORS %d (first: %s)", n, first)
}

// moduleVersions are the versions of the modules built into this binary.
func moduleVersions() map[string]string {
	out := map[string]string{}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	for _, m := range bi.Deps {
		v := m.Version
		if m.Replace != nil {
			v = "local checkout (replace " + m.Replace.Path + ")"
		}
		out[m.Path] = v
	}
	return out
}
