package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockgate/lockgate/example/seckill"
	"github.com/lockgate/lockgate/redistest"
)

type demoFlags struct {
	users, dup, nodes int
	stock, voucher    int64
	redisURL, modes   string
	httpImpl          string
	timeout           time.Duration
	keep              bool
	// chaos runs the chaos round (chaos.go) after the modes, with
	// chaosUsers users and the database stalled for stall.
	chaos      bool
	chaosUsers int
	stall      time.Duration
	// writeLimit is the nodes' -write-limit.
	writeLimit int
}

// modeResult is one column of the demo's table.
type modeResult struct {
	mode   string
	load   seckill.LoadResult
	report seckill.Report
	// locks are the lockgate figures scraped from the nodes' /metrics at
	// the end of the load (nothing in modes without a Redis lock).
	locks lockStats
}

func demo(ctx context.Context, args []string) error {
	fs := newFlags("demo", `Start a Redis (unless -redis or $REDIS_URL is given) and -nodes 'seckill serve' processes
sharing it and one SQLite file; for each -modes entry seed the voucher afresh, run loadgen over all nodes
and report. Prints the results side by side — with the lock figures of each mode read from the
nodes' /metrics: hit rate, wait p50/p99, renewal success ("n/a" where no lockgate lock ran) — then
'mode=M orders=N duplicates=N oversold=N' per mode. Then the chaos round (-chaos): Redis flushed while the
database stalls and -chaos-users users' first orders are inside their lock, the same users sent again
through the other nodes; with the fence-ordered write and with 'serve -unfenced', side by side, then
'chaos=V orders=N duplicates=N oversold=N' per variant. The duplicates of the modes without a Redis
lock and of the unfenced chaos round vary from run to run: they depend on how the racing requests
interleave on the machine. With -lock redis the nodes take a write permit of the voucher around each
order write (-write-limit; the chaos round's nodes run without one) and count the writes in progress;
the demo prints the peak of writes at once across the nodes against the limit, and the orders that
waited for a permit.
Exit status 1 if the redis mode shows a duplicate, an oversell or more writes at once than -write-limit, or the fenced chaos round a duplicate. Everything started is stopped at the
end and on Ctrl-C.`)
	var f demoFlags
	fs.IntVar(&f.users, "users", 300, "number of users")
	fs.IntVar(&f.dup, "dup", 8, "concurrent duplicate requests per user")
	fs.Int64Var(&f.stock, "stock", 200, "initial stock of the voucher")
	fs.Int64Var(&f.voucher, "voucher", 1, "voucher id")
	fs.IntVar(&f.nodes, "nodes", 3, "number of serve processes")
	fs.StringVar(&f.redisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL (loopback) to use instead of starting one; default $REDIS_URL")
	fs.StringVar(&f.modes, "modes", "local,redis", "lock modes to run, in order (redis, local, none)")
	fs.StringVar(&f.httpImpl, "http", seckill.StackFiber, "HTTP stack of the nodes: "+strings.Join(seckill.Stacks, ", "))
	fs.DurationVar(&f.timeout, "timeout", seckill.DefaultLoadTimeout, "bound on each mode's load run")
	fs.BoolVar(&f.keep, "keep", false, "keep the working directory (database, node logs)")
	fs.BoolVar(&f.chaos, "chaos", true, "after the modes, the chaos round: Redis flushed while the database stalls, with the\nfence-ordered write and with serve -unfenced, side by side (only on the demo's own Redis)")
	fs.IntVar(&f.chaosUsers, "chaos-users", 20, "users of the chaos round")
	fs.DurationVar(&f.stall, "stall", 2500*time.Millisecond, "how long the chaos round holds the database still (under the lease's TTL/3, 3.3s)")
	fs.IntVar(&f.writeLimit, "write-limit", seckill.DefaultWriteLimit, "the nodes' -write-limit: at most this many order writes of the voucher at once across the nodes\n(-lock redis; 0: none); the nodes count the writes in progress (serve -count-writes)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if f.users <= 0 || f.dup <= 0 || f.nodes <= 0 || f.stock < 0 || f.writeLimit < 0 {
		return errors.New("-users, -dup and -nodes must be positive, -stock and -write-limit not negative")
	}
	if f.chaos && (f.chaosUsers <= 0 || f.stall <= 0 || f.stall > 10*time.Second) {
		return errors.New("-chaos-users must be positive, -stall between 0 and 10s")
	}
	if _, err := seckill.ParseStack(f.httpImpl); err != nil {
		return err
	}
	var modes []string
	for _, m := range strings.Split(f.modes, ",") {
		if _, err := seckill.ParseLockMode(m); err != nil {
			return err
		}
		modes = append(modes, m)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "seckill-demo-")
	if err != nil {
		return err
	}
	if f.keep {
		fmt.Fprintln(os.Stderr, "demo: working directory", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	redisURL := f.redisURL
	if redisURL == "" {
		// redistest is the project's own harness for throwaway servers: a
		// free loopback port, no persistence, killed with the demo.
		srv, err := redistest.NewServer()
		if err != nil {
			return err
		}
		defer srv.Close()
		redisURL = srv.URL()
		fmt.Fprintln(os.Stderr, "demo: started redis-server at", redisURL)
	} else if err := checkLoopbackURL(redisURL); err != nil {
		return err
	}

	var results []modeResult
	for _, mode := range modes {
		r, err := runMode(ctx, self, dir, redisURL, mode, f)
		if err != nil {
			return fmt.Errorf("mode %s: %w", mode, err)
		}
		results = append(results, r)
	}
	printTable(os.Stdout, results)
	err = verdict(os.Stdout, results, f)
	switch {
	case !f.chaos:
	case f.redisURL != "":
		fmt.Fprintln(os.Stdout, errNoChaos)
	default:
		if cerr := chaos(ctx, os.Stdout, self, dir, redisURL, f); cerr != nil {
			var ex exitError
			if err == nil || !errors.As(cerr, &ex) {
				err = cerr
			}
		}
	}
	return err
}

// verdict prints the honest notes and decides the exit status.
func verdict(w io.Writer, results []modeResult, f demoFlags) error {
	var fail []string
	for _, r := range results {
		switch r.mode {
		case "local", "none":
			if r.report.Duplicates == 0 {
				fmt.Fprintf(w, "note: mode=%s showed no duplicates in this run: the cross-node race did not fire at this size; it is not prevented by an in-process lock\n", r.mode)
			} else {
				if r.mode == "local" {
					fmt.Fprintf(w, "mode=local: %d extra orders of users who already had one: a per-process lock does not hold across nodes\n", r.report.Duplicates)
				} else {
					fmt.Fprintf(w, "mode=none: %d extra orders of users who already had one: the check-then-insert race without a lock\n", r.report.Duplicates)
				}
				fmt.Fprintf(w, "note: mode=%s's count varies from run to run: it depends on how each user's racing requests interleave across the nodes on this machine\n", r.mode)
			}
		case "redis":
			if r.report.Duplicates > 0 || r.report.Oversold > 0 {
				fail = append(fail, fmt.Sprintf("mode=redis shows duplicates=%d oversold=%d", r.report.Duplicates, r.report.Oversold))
			} else {
				fmt.Fprintln(w, "mode=redis: one order per user across all nodes, no oversell")
			}
			if msg := writeLimitLine(w, r, f); msg != "" {
				fail = append(fail, msg)
			}
		}
	}
	if len(fail) > 0 {
		return exitError{1, "FAIL: " + strings.Join(fail, "; ")}
	}
	return nil
}

// writeLimitLine prints the write limit's figures of a redis mode's run
// (the nodes' -write-limit and -count-writes, read from their /metrics)
// and returns a failure when more writes were in progress at once than
// the limit allows.
func writeLimitLine(w io.Writer, r modeResult, f demoFlags) string {
	l := r.locks
	if !l.peakSeen {
		return "mode=redis: no node exported " + metricWritesPeak + " (serve -count-writes)"
	}
	limit := "no limit"
	if f.writeLimit > 0 {
		limit = fmt.Sprintf("limit %d", f.writeLimit)
	}
	fmt.Fprintf(w, "mode=redis write limit: peak order writes of voucher %d in progress at once across the %d nodes: %.0f (%s)\n",
		f.voucher, f.nodes, l.writesPeak, limit)
	fmt.Fprintf(w, "  measured: a Redis counter each node raises right before an order write (holding its permit) and\n")
	fmt.Fprintf(w, "  lowers after it; the highest value any raise returned: an upper bound of the writes at once\n")
	if f.writeLimit > 0 {
		fmt.Fprintf(w, "mode=redis write permits: %.0f taken, %.0f orders waited for one (every permit held when they came)\n", l.permits, l.permitWaits)
	}
	if f.writeLimit > 0 && l.writesPeak > float64(f.writeLimit) {
		return fmt.Sprintf("mode=redis had %.0f order writes in progress at once, over the write limit %d", l.writesPeak, f.writeLimit)
	}
	return ""
}

func printTable(w io.Writer, results []modeResult) {
	rows := []struct {
		name string
		val  func(modeResult) string
	}{
		{"requests", func(r modeResult) string { return strconv.Itoa(r.load.Requests) }},
		{"200 ordered", func(r modeResult) string { return strconv.Itoa(r.load.OK) }},
		{"400 already purchased", func(r modeResult) string { return strconv.Itoa(r.load.Already) }},
		{"400 out of stock", func(r modeResult) string { return strconv.Itoa(r.load.OutOfStock) }},
		{"429 busy", func(r modeResult) string { return strconv.Itoa(r.load.Busy) }},
		{"5xx", func(r modeResult) string { return strconv.Itoa(r.load.ServerErrors) }},
		{"other / no answer", func(r modeResult) string { return strconv.Itoa(r.load.Other + r.load.Failed) }},
		{"orders", func(r modeResult) string { return strconv.FormatInt(r.report.Orders, 10) }},
		{"duplicates", func(r modeResult) string { return strconv.FormatInt(r.report.Duplicates, 10) }},
		{"oversold", func(r modeResult) string { return strconv.FormatInt(r.report.Oversold, 10) }},
		{"latency p50", func(r modeResult) string { return fmtDur(r.load.P50) }},
		{"latency p99", func(r modeResult) string { return fmtDur(r.load.P99) }},
		// From the nodes' /metrics (otellock, summed over the nodes).
		{"lock acquires", func(r modeResult) string { return fmtCount(r.locks.acquires, r.locks.cum != nil) }},
		{"lock hit rate", func(r modeResult) string { return fmtPercent(r.locks.hitRate()) }},
		{"lock wait p50", func(r modeResult) string { return fmtSeconds(r.locks.waitQuantile(0.50)) }},
		{"lock wait p99", func(r modeResult) string { return fmtSeconds(r.locks.waitQuantile(0.99)) }},
		{"renewal success", func(r modeResult) string { return fmtPercent(r.locks.renewalRate()) }},
	}
	fmt.Fprintf(w, "%-22s", "")
	for _, r := range results {
		fmt.Fprintf(w, " %12s", "-lock "+r.mode)
	}
	fmt.Fprintln(w)
	for _, row := range rows {
		fmt.Fprintf(w, "%-22s", row.name)
		for _, r := range results {
			fmt.Fprintf(w, " %12s", row.val(r))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "lock rows: lockgate's metrics scraped from each node's /metrics after the load, summed over the")
	fmt.Fprintln(w, "nodes; hit rate = (acquired+reentered)/all acquires, wait p50/p99 interpolated in the buckets of")
	fmt.Fprintln(w, "lockgate_lock_acquire_duration_seconds (all outcomes), renewal success = ok/all renewals; n/a: none")
	fmt.Fprintln(w)
	for _, r := range results {
		fmt.Fprintf(w, "mode=%s %s\n", r.mode, r.report)
	}
}

func fmtDur(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
}

// runMode seeds fresh data, starts the nodes with -lock mode, loads them
// and reports; the nodes are stopped before it returns.
func runMode(ctx context.Context, self, dir, redisURL, mode string, f demoFlags) (modeResult, error) {
	res := modeResult{mode: mode}
	db := filepath.Join(dir, "seckill.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(db + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return res, err
		}
	}
	st, err := seckill.Open(ctx, db)
	if err != nil {
		return res, err
	}
	defer st.Close()
	if err := st.Seed(ctx, f.voucher, f.stock); err != nil {
		return res, err
	}

	var targets []string
	var nodes []*node
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	for i := range f.nodes {
		n, err := startNode(ctx, self, dir, i, []string{"-db", db, "-lock", mode, "-redis", redisURL, "-http", f.httpImpl,
			"-write-limit", strconv.Itoa(f.writeLimit), "-count-writes"})
		if err != nil {
			return res, err
		}
		nodes = append(nodes, n)
		targets = append(targets, n.url)
	}
	fmt.Fprintf(os.Stderr, "demo: -lock %s: %d nodes %s, %d users × %d duplicates, stock %d, -http %s\n",
		mode, len(nodes), strings.Join(targets, " "), f.users, f.dup, f.stock, f.httpImpl)
	res.load, err = seckill.RunLoad(ctx, seckill.LoadConfig{
		Targets: targets, VoucherID: f.voucher, Users: f.users, Dup: f.dup,
		Timeout: f.timeout, Progress: os.Stderr,
	})
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return res, err
	}
	// Before the nodes stop: their metrics live in their memory.
	if res.locks, err = scrapeLockStats(ctx, targets); err != nil {
		return res, err
	}
	res.report, err = st.Report(ctx, f.voucher)
	return res, err
}

// node is one `seckill serve` child process.
type node struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
	log    string
}

const startBudget = 20 * time.Second

// startNode starts `seckill serve` on free loopback ports and waits until
// it answers /healthz (bounded by startBudget; a few tries when a port
// was taken between probe and bind).
func startNode(ctx context.Context, self, dir string, i int, extra []string) (*node, error) {
	var lastErr error
	for try := 0; try < 3; try++ {
		httpPort, err := redistest.FreePort()
		if err != nil {
			return nil, err
		}
		grpcPort, err := redistest.FreePort()
		if err != nil {
			return nil, err
		}
		logPath := filepath.Join(dir, fmt.Sprintf("node-%d.log", i+1))
		logf, err := os.Create(logPath)
		if err != nil {
			return nil, err
		}
		args := append([]string{"serve",
			"-addr", "127.0.0.1:" + strconv.Itoa(httpPort),
			"-grpc-addr", "127.0.0.1:" + strconv.Itoa(grpcPort)}, extra...)
		cmd := exec.Command(self, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = childAttr()
		if err := cmd.Start(); err != nil {
			logf.Close()
			return nil, err
		}
		logf.Close()
		n := &node{cmd: cmd, url: "http://127.0.0.1:" + strconv.Itoa(httpPort), exited: make(chan struct{}), log: logPath}
		go func() { cmd.Wait(); close(n.exited) }()
		if lastErr = n.waitReady(ctx); lastErr == nil {
			return n, nil
		}
		n.stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, lastErr
}

func (n *node) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startBudget)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.url+"/healthz", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-n.exited:
			b, _ := os.ReadFile(n.log)
			return fmt.Errorf("node %s exited: %s", n.url, tail(string(b), 600))
		case <-ctx.Done():
			return fmt.Errorf("node %s not ready: %w", n.url, ctx.Err())
		case <-tick.C:
		}
	}
}

// stop asks the node to shut down (SIGTERM) and kills it after 5s.
func (n *node) stop() {
	select {
	case <-n.exited:
		return
	default:
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(5 * time.Second):
		n.cmd.Process.Kill()
		<-n.exited
	}
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func checkLoopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("-redis %q: %w", raw, err)
	}
	switch u.Hostname() {
	case "127.0.0.1", "localhost", "::1":
		return nil
	}
	return fmt.Errorf("-redis %q: the demo only talks to loopback addresses", raw)
}
