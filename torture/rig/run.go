package rig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RunConfig is one run of the rig. Zero fields take the defaults listed.
type RunConfig struct {
	Workers  int           // worker processes; default 6
	Keys     int           // keys they compete for; default 12
	Hot      int           // of which the hot ones, with 70% of the requests; default 3 (at most Keys)
	Crowd    int           // goroutines of the crowd process, waiting on the hot keys at once (0: none)
	Duration time.Duration // default 1m
	Seed     int64         // the fault schedule's seed; default the time
	Lock     string        // LockGate (default), LockNaive, LockIgnoreCtx, LockLoopMulti, LockNaiveSem, LockNaiveRW
	Multi    int           // percent of the workers' requests (not the crowd's) that take 2–3 keys at once with LockMulti; default 0
	Topology string        // "single" (default), "sentinel", "redlock" (3 masters) or "cluster" (3 masters)
	Faults   []string      // the fault kinds to inject; default all of the topology
	Fenced   bool          // the resource rejects lower fences (the default run passes true)
	Mutants  string        // LOCKGATE_MUTANTS for the workers (Bin built with -tags lockgate_mutants): the controls

	// Semaphore is the percent of the requests (the crowd's too) that take
	// a permit of the semaphore of the name drawn (Locker.Semaphore) instead
	// of its lock; default 0. None on Redlock, where Semaphore answers
	// ErrUnsupported: the share is dropped there, and no semaphore request
	// is sent.
	Semaphore int
	Permits   int // the semaphores' permits; default DefaultPermits

	// RW is the percent of the requests (the crowd's too) that take the
	// read-write lock of the name drawn (rw.go), as a reader (RLock) 3
	// times in 4, else a writer (Lock); default 0. None on Redlock, where
	// RLock answers ErrUnsupported: the share is dropped there.
	RW int

	TTL     time.Duration   // lease time; default 0: a mix per call, 50ms to 60s
	TTLs    []time.Duration // when set, each call's lease time is one of these
	Hold    time.Duration   // when set, how long the workers' holds last (default: mostly a few ms)
	Waits   []time.Duration // when set, each call's wait budget is one of these
	TryLock bool            // the workers (not the crowd) only TryLock
	// CrowdTTL, when set, is the crowd's lease time (the workers' stay
	// TTL/TTLs).
	CrowdTTL time.Duration
	// Pace, when set, is how long a lone worker waits after each request
	// (0.5–1.5 times it; default 0–2ms): its arrivals are spaced.
	Pace time.Duration
	// CrowdRestart is how long the crowd stays dead after kill_waiters
	// (default: restarted at once).
	CrowdRestart time.Duration
	Wait         time.Duration // wait budget of Lock; default 0: a mix per call, NoWait to 10s
	ReadTimeout  time.Duration // the workers' go-redis read timeout; default 300ms
	Limits       Limits        // the checker's; default DefaultLimits(TTL)

	Dir      string    // where the logs go; default a new temporary directory
	Bin      string    // the worker binary (this program); default os.Executable
	Progress io.Writer // a progress line every 5s; nil for none
}

// Topologies are the deployments the rig runs on.
var Topologies = []string{"single", "sentinel", "redlock", "cluster"}

func (c *RunConfig) defaults() error {
	if c.Workers <= 0 {
		c.Workers = 6
	}
	if c.Keys <= 0 {
		c.Keys = 12
	}
	if c.Hot <= 0 {
		c.Hot = 3
	}
	c.Hot = min(c.Hot, c.Keys)
	if c.Duration <= 0 {
		c.Duration = time.Minute
	}
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano() % 1_000_000
	}
	if c.Lock == "" {
		c.Lock = LockGate
	}
	switch c.Lock {
	case LockGate, LockNaive, LockIgnoreCtx, LockLoopMulti, LockNaiveSem, LockNaiveRW:
	default:
		return fmt.Errorf("-lock %q: want %s, %s, %s, %s, %s or %s", c.Lock, LockGate, LockNaive, LockIgnoreCtx, LockLoopMulti, LockNaiveSem, LockNaiveRW)
	}
	if c.Lock == LockLoopMulti && c.Multi <= 0 {
		return fmt.Errorf("-lock %s needs -multi above 0", LockLoopMulti)
	}
	if c.Topology == "" {
		c.Topology = "single"
	}
	if c.Semaphore < 0 || c.Semaphore > 100 {
		return fmt.Errorf("-sem %d: want a percent", c.Semaphore)
	}
	if c.Lock == LockNaiveSem && (c.Semaphore == 0 || c.Topology == "redlock") {
		return fmt.Errorf("-lock %s needs -sem above 0, and a topology other than redlock", LockNaiveSem)
	}
	if c.RW < 0 || c.RW > 100 {
		return fmt.Errorf("-rw %d: want a percent", c.RW)
	}
	if c.Lock == LockNaiveRW && (c.RW == 0 || c.Topology == "redlock") {
		return fmt.Errorf("-lock %s needs -rw above 0, and a topology other than redlock", LockNaiveRW)
	}
	if c.Topology == "redlock" {
		c.Semaphore, c.RW = 0, 0 // Semaphore and RLock answer ErrUnsupported there
	}
	if c.Permits <= 0 {
		c.Permits = DefaultPermits
	}
	if !slices.Contains(Topologies, c.Topology) {
		return fmt.Errorf("-topology %q: want one of %s", c.Topology, strings.Join(Topologies, ", "))
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 300 * time.Millisecond
	}
	if c.Limits == (Limits{}) {
		c.Limits = DefaultLimits(c.TTL)
	}
	if c.Bin == "" {
		b, err := os.Executable()
		if err != nil {
			return err
		}
		c.Bin = b
	}
	if c.Dir == "" {
		d, err := os.MkdirTemp("", "torture-")
		if err != nil {
			return err
		}
		c.Dir = d
	}
	return nil
}

// enabled reports whether faults of kind are injected: every kind of the
// topology by default, but command_latency only when named.
func (c *RunConfig) enabled(kind string) bool {
	return len(c.Faults) == 0 && kind != FaultCommandLatency || slices.Contains(c.Faults, kind)
}

// Run starts everything a run needs (Redis, the proxies, the resource, the
// workers), injects faults until the duration passes or ctx ends, stops
// everything it started, and checks the logs.
func Run(ctx context.Context, cfg RunConfig) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	res, err := NewResource(cfg.Fenced)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	procsN := cfg.Workers
	if cfg.Crowd > 0 {
		procsN++
	}
	dep, err := newDeployment(cfg.Topology, procsN)
	if err != nil {
		return nil, err
	}
	defer dep.close()
	ch := &chaos{cfg: &cfg, dep: dep, counts: map[string]int{}}
	if dep.cluster != nil {
		ch.cc = redis.NewClusterClient(dep.cluster.Options())
		defer ch.cc.Close()
	}
	faultLog, err := createLog(filepath.Join(cfg.Dir, "faults.jsonl"))
	if err != nil {
		return nil, err
	}
	ch.log = faultLog
	procs := &processes{cfg: &cfg, args: func(i, gen int) []string {
		args := []string{
			"-redis", strings.Join(dep.addrs, ","), "-master", dep.master, "-routes", dep.routes(i), "-resource", res.Addr,
			"-keys", strconv.Itoa(cfg.Keys), "-hot", strconv.Itoa(cfg.Hot), "-seed", strconv.FormatInt(cfg.Seed*1000+int64(i)*10+int64(gen), 10),
			"-lock", cfg.Lock, "-ttl", cfg.TTL.String(), "-wait", cfg.Wait.String(), "-read-timeout", cfg.ReadTimeout.String(),
			"-ctx-timeout=" + strconv.FormatBool(i%2 == 1), // both ways of bounding a call
			"-redlock=" + strconv.FormatBool(cfg.Topology == "redlock"),
			"-cluster=" + strconv.FormatBool(cfg.Topology == "cluster"),
		}
		if i == cfg.Workers {
			args = append(args, "-crowd", strconv.Itoa(cfg.Crowd))
		}
		if cfg.Hold > 0 {
			args = append(args, "-hold", cfg.Hold.String())
		}
		if len(cfg.TTLs) > 0 {
			args = append(args, "-ttls", joinDurations(cfg.TTLs))
		}
		if len(cfg.Waits) > 0 {
			args = append(args, "-waits", joinDurations(cfg.Waits))
		}
		if cfg.TryLock {
			args = append(args, "-trylock")
		}
		if cfg.CrowdTTL > 0 {
			args = append(args, "-crowd-ttl", cfg.CrowdTTL.String())
		}
		if cfg.Pace > 0 {
			args = append(args, "-pace", cfg.Pace.String())
		}
		if cfg.Multi > 0 {
			args = append(args, "-multi", strconv.Itoa(cfg.Multi))
		}
		if cfg.Semaphore > 0 {
			args = append(args, "-sem", strconv.Itoa(cfg.Semaphore), "-permits", strconv.Itoa(cfg.Permits))
		}
		if cfg.RW > 0 {
			args = append(args, "-rw", strconv.Itoa(cfg.RW))
		}
		return args
	}}
	ch.procs = procs
	if err := procs.startAll(); err != nil {
		procs.stopAll(time.Second)
		return nil, err
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	if cfg.Progress != nil {
		go progress(rctx, cfg.Progress, start, cfg.Duration, ch, res)
	}
	ch.run(rctx)
	procs.stopAll(10 * time.Second)
	faultLog.close()
	if ctx.Err() != nil {
		return nil, errors.New("torture: interrupted")
	}

	var events []Event
	for _, f := range procs.logFiles() {
		ev, err := readLines[Event](f)
		if errors.Is(err, fs.ErrNotExist) {
			continue // stopped before it logged anything (started as the run ended)
		}
		if err != nil {
			return nil, err
		}
		events = append(events, ev...)
	}
	faults, err := readLines[Fault](filepath.Join(cfg.Dir, "faults.jsonl"))
	if err != nil {
		return nil, err
	}
	writes := res.Writes()
	writeLog, err := createLog(filepath.Join(cfg.Dir, "writes.jsonl"))
	if err == nil {
		for _, w := range writes {
			writeLog.add(w, false)
		}
		writeLog.close()
	}
	lim := cfg.Limits
	lim.Redlock = cfg.Topology == "redlock"
	return Check(events, writes, faults, lim), nil
}

func joinDurations(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.String())
	}
	return strings.Join(s, ",")
}

// CheckDir checks the logs a run left in dir again (with other limits, or
// a changed checker).
func CheckDir(dir string, lim Limits) (*Report, error) {
	files, err := filepath.Glob(filepath.Join(dir, "w*.jsonl"))
	if err != nil {
		return nil, err
	}
	var events []Event
	for _, f := range files {
		ev, err := readLines[Event](f)
		if err != nil {
			return nil, err
		}
		events = append(events, ev...)
	}
	faults, err := readLines[Fault](filepath.Join(dir, "faults.jsonl"))
	if err != nil {
		return nil, err
	}
	writes, err := readLines[Write](filepath.Join(dir, "writes.jsonl"))
	if err != nil {
		return nil, err
	}
	return Check(events, writes, faults, lim), nil
}

func progress(ctx context.Context, w io.Writer, start time.Time, d time.Duration, ch *chaos, res *Resource) {
	every(ctx, 5*time.Second, func() {
		fmt.Fprintf(w, "torture: %v/%v faults=%d writes=%d\n", time.Since(start).Round(time.Second), d, ch.total(), res.Count())
	})
}
