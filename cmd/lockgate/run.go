package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/lockgate/lockgate/core"
)

// Exit codes.
const (
	exitOK     = 0 // done, or help asked for
	exitFailed = 1 // runtime error: Redis unavailable, lock changed hands
	exitUsage  = 2 // bad invocation: nothing was sent to Redis
)

// run is the command: args without the program name. It returns the exit
// code; results go to stdout, errors and usage hints to stderr (help asked
// for goes to stdout).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, rest, err := parseGlobal(args)
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout)
		return exitOK
	}
	if err != nil {
		return fail(stderr, err)
	}
	if len(rest) == 0 {
		return fail(stderr, usageErr("no command given"))
	}
	name, args := rest[0], rest[1:]
	if name == "help" {
		return help(args, stdout, stderr)
	}
	cmd := lookup(name)
	if cmd == nil {
		return fail(stderr, usageErr("unknown command %q", name))
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	s := &session{cfg: cfg}
	defer s.close()
	err = cmd.run(ctx, s, args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		commandUsage(stdout, cmd)
		return exitOK
	}
	err = tlsHint(authHint(err, cfg), cfg)
	if errors.Is(err, core.ErrUnavailable) && (errors.Is(ctx.Err(), context.DeadlineExceeded) || timedOut(err)) {
		err = fmt.Errorf("%w (no answer within -timeout %v)", err, cfg.timeout)
	}
	return fail(stderr, err)
}

// timedOut reports whether err is a deadline's: the command's context or
// a connection's i/o timeout, which is never longer than -timeout.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// help writes the usage, or one command's.
func help(args []string, stdout, stderr io.Writer) int {
	switch len(args) {
	case 0:
		usage(stdout)
		return exitOK
	case 1:
		if c := lookup(args[0]); c != nil {
			commandUsage(stdout, c)
			return exitOK
		}
		return fail(stderr, usageErr("help: unknown command %q", args[0]))
	}
	return fail(stderr, usageErr("help: one COMMAND expected"))
}

// fail reports err and returns its exit code (exitOK for nil).
func fail(stderr io.Writer, err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "lockgate: %v\n", err)
		shortUsage(stderr)
		return exitUsage
	}
	fmt.Fprintf(stderr, "lockgate: %s\n", strings.TrimPrefix(err.Error(), "lockgate: "))
	if errors.Is(err, core.ErrInvalid) { // a bad KEY or -prefix: nothing was sent
		return exitUsage
	}
	return exitFailed
}

// opError is a failed operation on a lock, named by op. Its text drops the
// "lockgate: " of core's errors, which fail writes once.
type opError struct {
	op  string
	err error
}

func opErr(op string, err error) error { return &opError{op: op, err: err} }

func (e *opError) Error() string {
	return e.op + ": " + strings.TrimPrefix(e.err.Error(), "lockgate: ")
}

func (e *opError) Unwrap() error { return e.err }
