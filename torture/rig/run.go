package rig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockgate/lockgate/redistest"
)

// RunConfig is one run of the rig. Zero fields take the defaults listed.
type RunConfig struct {
	Workers  int           // worker processes; default 6
	Keys     int           // keys they compete for; default 3
	Duration time.Duration // default 1m
	Seed     int64         // the fault schedule's seed; default the time
	Lock     string        // LockGate (default), LockNaive, LockIgnoreCtx
	Topology string        // "single" (default: one Redis behind the fault proxy), "sentinel", or "redlock" (3 masters, each behind a proxy)
	Faults   []string      // the fault kinds to inject; default all of the topology
	Fenced   bool          // the resource rejects lower fences (the default run passes true)

	TTL         time.Duration // lease time; default 500ms
	Wait        time.Duration // wait budget of Lock; default 1s
	ReadTimeout time.Duration // the workers' go-redis read timeout; default 300ms
	Limits      Limits        // the checker's; default DefaultLimits(TTL)

	Dir      string    // where the logs go; default a new temporary directory
	Bin      string    // the worker binary (this program); default os.Executable
	Progress io.Writer // a progress line every 5s; nil for none
}

func (c *RunConfig) defaults() error {
	if c.Workers <= 0 {
		c.Workers = 6
	}
	if c.Keys <= 0 {
		c.Keys = 3
	}
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
	case LockGate, LockNaive, LockIgnoreCtx:
	default:
		return fmt.Errorf("-lock %q: want %s, %s or %s", c.Lock, LockGate, LockNaive, LockIgnoreCtx)
	}
	if c.Topology == "" {
		c.Topology = "single"
	}
	if c.Topology != "single" && c.Topology != "sentinel" && c.Topology != "redlock" {
		return fmt.Errorf("-topology %q: want single, sentinel or redlock", c.Topology)
	}
	if c.TTL <= 0 {
		c.TTL = 500 * time.Millisecond
	}
	if c.Wait <= 0 {
		c.Wait = time.Second
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

// enabled reports whether faults of kind are injected.
func (c *RunConfig) enabled(kind string) bool {
	return len(c.Faults) == 0 || slices.Contains(c.Faults, kind)
}

// Run starts everything a run needs (Redis, the fault proxy or Sentinel,
// the resource, the workers), injects faults until the duration passes or
// ctx ends, stops everything it started, and checks the logs.
func Run(ctx context.Context, cfg RunConfig) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	res, err := NewResource(cfg.Fenced)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	ch := &chaos{cfg: &cfg, counts: map[string]int{}}
	redisArg, master := "", ""
	if cfg.Topology == "sentinel" {
		st, err := redistest.NewSentinel()
		if err != nil {
			return nil, err
		}
		defer st.Close()
		ch.st = st
		redisArg, master = strings.Join(st.SentinelAddrs, ","), st.MasterName
	} else {
		nodes := 1
		if cfg.Topology == "redlock" {
			nodes = 3
		}
		var addrs []string
		for range nodes {
			srv, err := redistest.NewServer()
			if err != nil {
				return nil, err
			}
			defer srv.Close()
			proxy, err := redistest.NewProxy(srv.Addr)
			if err != nil {
				return nil, err
			}
			defer proxy.Close()
			ch.srvs, ch.proxies = append(ch.srvs, srv), append(ch.proxies, proxy)
			addrs = append(addrs, proxy.Addr)
		}
		redisArg = strings.Join(addrs, ",")
	}
	faultLog, err := createLog(filepath.Join(cfg.Dir, "faults.jsonl"))
	if err != nil {
		return nil, err
	}
	ch.log = faultLog
	procs := &processes{cfg: &cfg, args: func(i, gen int) []string {
		return []string{
			"-redis", redisArg, "-master", master, "-resource", res.Addr,
			"-keys", strconv.Itoa(cfg.Keys), "-seed", strconv.FormatInt(cfg.Seed*1000+int64(i)*10+int64(gen), 10),
			"-lock", cfg.Lock, "-ttl", cfg.TTL.String(), "-wait", cfg.Wait.String(), "-read-timeout", cfg.ReadTimeout.String(),
			"-ctx-timeout=" + strconv.FormatBool(i%2 == 1), // both ways of bounding a call
			"-redlock=" + strconv.FormatBool(cfg.Topology == "redlock"),
		}
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
	return Check(events, writes, faults, cfg.Limits), nil
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
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fmt.Fprintf(w, "torture: %v/%v faults=%d writes=%d\n", time.Since(start).Round(time.Second), d, ch.total(), res.Count())
		}
	}
}
