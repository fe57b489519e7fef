// Command torture is lockgate's fault-injection rig.
//
//	torture run [flags]    start Redis (behind a fault proxy, or with Sentinel), a fenced
//	                       resource and worker processes; inject faults from a seed; check
//	torture worker [flags] one worker process (started by run)
//	torture check -dir D   judge the logs a run left in D again
//
// Workers compete for a few keys with Lock (waiting), TryLock, re-entry to
// depth 3, Extend, cancelled waits and Close of their Locker while they
// hold; each holder writes to the resource, which records every write and
// rejects a lower fence than it has seen. The chaos controller pauses and
// kills holders, restarts and hangs Redis (shorter and longer than the read
// timeout), holds replies past the read timeout, cuts connections, adds
// latency, and with -topology sentinel forces failovers. The checker then
// counts: interleaved accepted writes, writes after a loss, holders that
// still believed they held a lock when the next one wrote, "busy" answers
// while Redis was hung, calls past their budget, and deadlocks ("busy" long
// after every holder had stopped). It prints a table and the line
//
//	faults=N violations=0 overlaps_unfenced=N deadlocks=0
//
// and exits 1 on any violation or deadlock. -lock naive (SET NX PX + DEL)
// and -lock ignorectx (a holder that ignores its lease context) are the
// controls: they must fail. Ctrl-C stops everything the run started.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lockgate/lockgate/torture/rig"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: torture run|worker [flags]; torture run -h")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "run":
		err = run(ctx, os.Args[2:])
	case "worker":
		err = worker(ctx, os.Args[2:])
	case "check":
		err = check(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want run or worker", os.Args[1])
	}
	if errors.Is(err, errFailed) {
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "torture:", err)
		os.Exit(2)
	}
}

var errFailed = errors.New("violations found")

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	var cfg rig.RunConfig
	var faults string
	var unfenced bool
	fs.IntVar(&cfg.Workers, "workers", 6, "worker processes")
	fs.IntVar(&cfg.Keys, "keys", 3, "keys they compete for")
	fs.DurationVar(&cfg.Duration, "duration", time.Minute, "how long faults are injected")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the fault schedule (0: from the clock; printed)")
	fs.StringVar(&cfg.Lock, "lock", rig.LockGate, "lockgate, or the controls naive (SET NX PX + DEL) and ignorectx (a holder ignoring its lease context)")
	fs.StringVar(&cfg.Topology, "topology", "single", "single (one Redis behind the fault proxy), sentinel (master, replica, sentinel; forced failovers) or redlock (3 masters behind proxies; one master's faults)")
	fs.StringVar(&faults, "faults", "", "comma-separated fault kinds to inject (default all of the topology): "+
		strings.Join([]string{rig.FaultPause, rig.FaultKill, rig.FaultRestart, rig.FaultHangShort, rig.FaultHangLong, rig.FaultLateReply, rig.FaultCut, rig.FaultLatency, rig.FaultFailover, rig.FaultMasterHang, rig.FaultNodeRestart, rig.FaultNodeHang, rig.FaultNodeNet}, ", "))
	fs.BoolVar(&unfenced, "unfenced", false, "the resource accepts every write (no fencing)")
	fs.DurationVar(&cfg.TTL, "ttl", 500*time.Millisecond, "lease time")
	fs.DurationVar(&cfg.Wait, "wait", time.Second, "wait budget of Lock")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", 300*time.Millisecond, "the workers' go-redis read timeout")
	fs.StringVar(&cfg.Dir, "dir", "", "directory for the logs (default a new temporary one, printed)")
	fs.Parse(args)
	if faults != "" {
		cfg.Faults = strings.Split(faults, ",")
	}
	cfg.Fenced = !unfenced
	cfg.Progress = os.Stderr
	start := time.Now()
	if cfg.Seed == 0 {
		cfg.Seed = start.UnixNano() % 1_000_000
	}
	fmt.Fprintf(os.Stderr, "torture: seed %d, %d workers, %d keys, %v, -lock %s, -topology %s\n", cfg.Seed, cfg.Workers, cfg.Keys, cfg.Duration, cfg.Lock, cfg.Topology)
	rep, err := rig.Run(ctx, cfg)
	if err != nil {
		return err
	}
	rep.Print(os.Stdout, cfg.Seed, time.Since(start))
	if rep.Violations() > 0 || len(rep.Deadlocks) > 0 {
		return errFailed
	}
	return nil
}

func worker(ctx context.Context, args []string) error { return rig.WorkerMain(ctx, args) }

// check judges the logs of a past run again.
func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	dir := fs.String("dir", "", "the run's -dir")
	ttl := fs.Duration("ttl", 500*time.Millisecond, "the run's -ttl")
	fs.Parse(args)
	rep, err := rig.CheckDir(*dir, rig.DefaultLimits(*ttl))
	if err != nil {
		return err
	}
	rep.Print(os.Stdout, 0, 0)
	if rep.Violations() > 0 || len(rep.Deadlocks) > 0 {
		return errFailed
	}
	return nil
}
