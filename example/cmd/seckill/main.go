// Command seckill is the lockgate example: a flash-sale service where each
// user may buy one voucher, run as several nodes behind one database, and
// the tools that load it and check the result.
//
//	seckill serve   -addr 127.0.0.1:8080 -grpc-addr 127.0.0.1:9090 -redis redis://127.0.0.1:6379/0 -db seckill.db -lock redis
//	seckill seed    -db seckill.db -voucher 1 -stock 200
//	seckill loadgen -targets http://127.0.0.1:8080,http://127.0.0.1:8081 -voucher 1 -users 300 -dup 8
//	seckill report  -db seckill.db -voucher 1
//	seckill demo    -users 300 -dup 8 -stock 200
//
// Run `seckill <command> -h` for each command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: seckill <command> [flags]

commands:
  serve    run one node of the flash-sale service (HTTP and gRPC)
  seed     create or reset a voucher with its stock, deleting its orders
  report   print orders=N duplicates=N oversold=N for a voucher
  loadgen  send users × duplicate concurrent orders to nodes round-robin
  demo     3 nodes, -lock local then -lock redis, results side by side

Run 'seckill <command> -h' for the flags of a command.
`

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var cmd func(context.Context, []string) error
	switch args[0] {
	case "serve":
		cmd = serve
	case "seed":
		cmd = seed
	case "report":
		cmd = report
	case "loadgen":
		cmd = loadgen
	case "demo":
		cmd = demo
	case "-h", "-help", "--help", "help":
		fmt.Fprint(os.Stdout, usage)
		return 0
	default:
		fmt.Fprintf(os.Stderr, "seckill: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	err := cmd(ctx, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "seckill: interrupted; everything started was stopped")
		return 130
	}
	var ex exitError
	if errors.As(err, &ex) {
		fmt.Fprintln(os.Stderr, "seckill:", ex.msg)
		return ex.code
	}
	fmt.Fprintln(os.Stderr, "seckill:", err)
	return 1
}

// errUsage is returned when a flag set already printed its error.
var errUsage = errors.New("usage")

// exitError carries a specific exit status.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// newFlags returns a flag set that prints its usage with a description.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("seckill "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: seckill %s [flags]\n\n%s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		fs.Usage()
		return errUsage
	}
	return nil
}
