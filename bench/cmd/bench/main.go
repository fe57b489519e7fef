// Command bench measures lockgate against its Go peers (bsm/redislock,
// go-redsync/redsync, rueidislock) and lockgate's HTTP adapters, on
// redis-servers it starts on loopback, and writes a Markdown report.
//
//	go run ./cmd/bench -out RESULTS.md          # the full run (about 10½ minutes on 2 cores)
//	go run ./cmd/bench -quick                   # every configuration once, 150ms each
//	go run ./cmd/bench -only contended/lockgate # a subset, by name substring
//	go run ./cmd/bench -only c=64 -cpuprofile cpu.out # where the time goes (go tool pprof)
//
// The tables also go to stdout; progress goes to stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/lockgate/lockgate/bench"
)

func main() {
	var cfg bench.Config
	out := flag.String("out", "", "write the Markdown report to this file (default: stdout only)")
	flag.IntVar(&cfg.Reps, "reps", 5, "repetitions of every configuration, interleaved")
	flag.DurationVar(&cfg.Duration, "duration", bench.DefaultDuration, "length of one uncontended or middleware run")
	flag.DurationVar(&cfg.Contended, "contended", bench.DefaultContended, "length of one contended run")
	flag.StringVar(&cfg.Only, "only", "", "run only configurations whose name contains one of these comma-separated parts at a segment start (e.g. contended/lockgate, c=64, middleware/fiber, tuned)")
	flag.BoolVar(&cfg.Quick, "quick", false, "smoke size: 1 rep, 150ms per run (overrides -reps, -duration, -contended)")
	flag.IntVar(&cfg.Names, "names", 0, "distinct names the names benchmark locks once each (floor, lockgate, redislock); 0: 1 000 000, 20 000 with -quick")
	flag.IntVar(&cfg.HTTPClients, "http-clients", 32, "concurrent clients of the middleware load generator")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (this process: the lockers and the load, not redis-server) to this file")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "bench: unexpected arguments:", flag.Args())
		os.Exit(2)
	}
	cfg.CommandLine = strings.Join(append([]string{"go run ./cmd/bench"}, os.Args[1:]...), " ")
	cfg.Log = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	rep, err := bench.Run(ctx, cfg)
	if *cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		if rep == nil || ctx.Err() == nil {
			os.Exit(1)
		}
	}
	fmt.Println(rep.Tables())
	if *out != "" {
		if err := os.WriteFile(*out, []byte(rep.Markdown()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "bench: wrote", *out)
	}
	if err != nil {
		os.Exit(1)
	}
}
