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
// and exits 1 on any violation or deadlock. -lock naive (a SET NX PX lock
// with a fixed expiry, released by DEL) and -lock ignorectx (a holder that
// ignores its lease context) are the controls: they must fail. -multi N
// makes N% of the workers' requests take 2–3 keys at once with LockMulti
// and write to each; -lock loopmulti (with -multi) is its control, a loop
// of Locks that keeps what it took when a later one fails, and must fail
// too. -sem N makes N% of the requests (the crowd's too) take a permit
// of the semaphore of the name drawn (-permits, default 3) instead of its
// lock, held and written to as a lock is; the checker adds "at most N
// holders believed at once" and "fences increase in grant order" per
// semaphore. -lock naivesem (with -sem), a counter semaphore with a fixed
// expiry, is their control and must fail. Redlock takes no semaphore
// requests (Semaphore is unsupported there). -rw N makes N% of the
// requests take the read-write lock of the name drawn, as a reader (RLock)
// 3 times in 4, else a writer (Lock); the checker adds "a writer alone, a
// reader never beside a writer" and fence order; -lock naiverw (with -rw),
// readers that take another name's read lock, is its control and must
// fail (none on redlock either). Ctrl-C stops everything the run started.
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
	fs.IntVar(&cfg.Keys, "keys", 12, "keys they compete for")
	fs.IntVar(&cfg.Hot, "hot", 3, "of which hot (70% of the requests)")
	fs.IntVar(&cfg.Crowd, "crowd", 0, "goroutines of a crowd process waiting on the hot keys at once, killed now and then while queued (0: none)")
	fs.DurationVar(&cfg.Duration, "duration", time.Minute, "how long faults are injected")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the fault schedule (0: from the clock; printed)")
	fs.StringVar(&cfg.Lock, "lock", rig.LockGate, "lockgate, or the controls naive (a SET NX PX lock with a fixed expiry, released by DEL), ignorectx (a holder ignoring its lease context) and loopmulti (with -multi: a LockMulti that is a loop of Locks in the order drawn, keeping what it took when a later one fails) and naivesem (with -sem: a semaphore that is a counter, INCR/DECR with an expiry set once) and naiverw (with -rw: readers that exclude no writer)")
	fs.IntVar(&cfg.Semaphore, "sem", 0, "percent of the requests (the crowd's too) that take a permit of the drawn name's semaphore with Semaphore and write to it (none on redlock)")
	fs.IntVar(&cfg.Permits, "permits", rig.DefaultPermits, "the semaphores' permits")
	fs.IntVar(&cfg.RW, "rw", 0, "percent of the requests (the crowd's too) that take the drawn name's read-write lock, 3 in 4 as readers (RLock), and write to it (none on redlock)")
	fs.IntVar(&cfg.Multi, "multi", 0, "percent of the workers' requests (not the crowd's) that take 2-3 keys at once with LockMulti and write to each")
	fs.StringVar(&cfg.Topology, "topology", "single", "single (one Redis), sentinel (master, replica, sentinel; forced failovers), redlock (3 masters; one master's faults) or cluster (3 masters; pauses, restarts, slot migrations)")
	fs.StringVar(&faults, "faults", "", "comma-separated fault kinds to inject (default all of the topology): "+
		strings.Join([]string{rig.FaultPause, rig.FaultKill, rig.FaultKillWaiters, rig.FaultWorkerLatency, rig.FaultSlowReply, rig.FaultRestart, rig.FaultHangShort, rig.FaultHangLong, rig.FaultLateReply, rig.FaultCut, rig.FaultLatency,
			rig.FaultFailover, rig.FaultMasterHang, rig.FaultNodeRestart, rig.FaultNodeHang, rig.FaultNodeNet, rig.FaultMasterPause, rig.FaultMasterRestart, rig.FaultMigrate}, ", ")+
		"; only when named: "+rig.FaultCommandLatency+"; "+rig.NoFaults+" for none")
	fs.BoolVar(&unfenced, "unfenced", false, "the resource accepts every write (no fencing)")
	fs.DurationVar(&cfg.TTL, "ttl", 0, "lease time (0: a mix per call, 50ms to 60s)")
	fs.DurationVar(&cfg.Wait, "wait", 0, "wait budget of Lock (0: a mix per call, NoWait to 10s)")
	fs.DurationVar(&cfg.Hold, "hold", 0, "how long the workers' holds last (0: mostly a few ms, 10% past the TTL)")
	var ttls, waits string
	fs.StringVar(&ttls, "ttls", "", "comma-separated lease times each call draws from (overrides the mix)")
	fs.StringVar(&waits, "waits", "", "comma-separated wait budgets each call draws from (overrides the mix)")
	fs.BoolVar(&cfg.TryLock, "trylock", false, "the workers (not the crowd) only TryLock")
	fs.DurationVar(&cfg.CrowdRestart, "crowd-restart", 0, "how long the crowd stays dead after kill_waiters")
	fs.DurationVar(&cfg.CrowdTTL, "crowd-ttl", 0, "the crowd's lease time (0: as -ttl/-ttls)")
	fs.DurationVar(&cfg.Pace, "pace", 0, "how long each worker waits after each request, 0.5-1.5 times it (0: 0-2ms)")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", 300*time.Millisecond, "the workers' go-redis read timeout")
	fs.StringVar(&cfg.Mutants, "mutants", "", "fixed defects to put back in the workers (a binary built with -tags lockgate_mutants): the liveness controls")
	fs.StringVar(&cfg.Dir, "dir", "", "directory for the logs (default a new temporary one, printed)")
	fs.Parse(args)
	if faults != "" {
		cfg.Faults = strings.Split(faults, ",")
	}
	var err error
	if cfg.TTLs, err = rig.ParseDurations(ttls); err != nil {
		return fmt.Errorf("-ttls: %w", err)
	}
	if cfg.Waits, err = rig.ParseDurations(waits); err != nil {
		return fmt.Errorf("-waits: %w", err)
	}
	cfg.Fenced = !unfenced
	cfg.Progress = os.Stderr
	start := time.Now()
	if cfg.Seed == 0 {
		cfg.Seed = start.UnixNano() % 1_000_000
	}
	if cfg.Topology == "redlock" && cfg.Semaphore > 0 {
		fmt.Fprintf(os.Stderr, "torture: -sem %d ignored: Semaphore is unsupported on redlock\n", cfg.Semaphore)
		cfg.Semaphore = 0
	}
	if cfg.Topology == "redlock" && cfg.RW > 0 {
		fmt.Fprintf(os.Stderr, "torture: -rw %d ignored: RLock is unsupported on redlock\n", cfg.RW)
		cfg.RW = 0
	}
	fmt.Fprintf(os.Stderr, "torture: seed %d, %d workers (crowd %d), %d keys (%d hot), %v, -lock %s, -topology %s, -multi %d, -sem %d (%d permits), -rw %d\n", cfg.Seed, cfg.Workers, cfg.Crowd, cfg.Keys, cfg.Hot, cfg.Duration, cfg.Lock, cfg.Topology, cfg.Multi, cfg.Semaphore, cfg.Permits, cfg.RW)
	rep, err := rig.Run(ctx, cfg)
	if err != nil {
		return err
	}
	rep.Print(os.Stdout, cfg.Seed, time.Since(start))
	if rep.Failed() {
		return errFailed
	}
	return nil
}

func worker(ctx context.Context, args []string) error { return rig.WorkerMain(ctx, args) }

// check judges the logs of a past run again.
func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	dir := fs.String("dir", "", "the run's -dir")
	ttl := fs.Duration("ttl", 0, "the run's -ttl (0: each call's own)")
	topology := fs.String("topology", "single", "the run's -topology")
	fs.Parse(args)
	lim := rig.DefaultLimits(*ttl)
	lim.Redlock = *topology == "redlock"
	rep, err := rig.CheckDir(*dir, lim)
	if err != nil {
		return err
	}
	rep.Print(os.Stdout, 0, 0)
	if rep.Failed() {
		return errFailed
	}
	return nil
}
