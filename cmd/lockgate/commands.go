package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/lockgate/lockgate/core"
)

// command is one of lockgate's commands.
type command struct {
	name     string
	synopsis string // the command line, after "lockgate [global flags]"
	help     string // what it does, for the usage text
	// run parses args (usage errors before anything is sent to Redis) and
	// does the command, connecting through s.
	run func(ctx context.Context, s *session, args []string, stdout io.Writer) error
}

// commands are lockgate's commands in the order the usage lists them
// (help is handled by run itself).
var commands = []*command{
	{
		name:     "ping",
		synopsis: "ping",
		help: `Check that lockgate can use the deployment: every node it would use
answers (the master, the master behind Sentinel, every Cluster master),
and each server is Redis 7.0 or later. Print "ok: " and what it
reached: "server HOST:PORT", "Cluster of N masters (seeds ...)" or
"Sentinel master NAME at HOST:PORT", then ", TLS" and ", user NAME"
when they apply. Else print the nodes that did not answer and why
(exit 1).`,
		run: ping,
	},
	{
		name:     "inspect",
		synopsis: "inspect KEY",
		help: `Show what Redis knows of the lock KEY, without taking or changing it:
whether it is held, its remaining TTL, its fence, how long ago it was
granted, how many callers wait for it, and the holder's trace id.`,
		run: inspect,
	},
	{
		name:     "ls",
		synopsis: "ls [-limit N] [PATTERN]",
		help: `List the locks whose name matches PATTERN (Redis glob syntax:
* ? [abc] and \ to quote; default: every lock), at most N of them
(-limit, default 100), sorted by name, with inspect's columns. The
last line counts them; "(N locks; limit reached)" says there are more:
narrow PATTERN or raise -limit. It SCANs every key under the
prefix on every master, so it takes time in the number of keys on the
server: an operator's tool, not a health check.`,
		run: list,
	},
	{
		name:     "release",
		synopsis: "release KEY --force",
		help: `Remove the lock KEY whoever holds it and hand it to its first
live waiter; print the hold removed ("removing:"), then "released",
or "nothing held" when the lock was free. It removes exactly the hold
it found: if the lock changed hands meanwhile, nothing is removed
(exit 1).
This is the LAST RESORT, for a lock whose holder is known to be gone
(its process crashed or hangs) and whose TTL is too long to wait for.
The holder, if alive, keeps running until its next renewal notices
the loss (within a third of its TTL with the watchdog; a lease without
the watchdog runs until its TTL would have ended); until then two
owners may act at once, and only a fence checked by the protected
resource stops the old one. Without --force (or -force) it does
nothing and exits 2.`,
		run: release,
	},
}

func lookup(name string) *command {
	i := slices.IndexFunc(commands, func(c *command) bool { return c.name == name })
	if i < 0 {
		return nil
	}
	return commands[i]
}

// oneKey returns the single KEY of args.
func oneKey(cmd string, args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", usageErr("%s: missing KEY", cmd)
	case 1:
		return args[0], nil
	}
	return "", usageErr("%s: one KEY expected, got %d arguments %q", cmd, len(args), args)
}

func ping(ctx context.Context, s *session, args []string, stdout io.Writer) error {
	args, err := parseArgs(quiet(flag.NewFlagSet("ping", flag.ContinueOnError)), args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageErr("ping: no arguments expected, got %q", args)
	}
	l, err := s.lockerFor()
	if err != nil {
		return err
	}
	if err := l.Ping(ctx); err != nil {
		return opErr("ping", err)
	}
	_, err = fmt.Fprintf(stdout, "ok: %s\n", s.reached(ctx))
	return err
}

func inspect(ctx context.Context, s *session, args []string, stdout io.Writer) error {
	args, err := parseArgs(quiet(flag.NewFlagSet("inspect", flag.ContinueOnError)), args)
	if err != nil {
		return err
	}
	key, err := oneKey("inspect", args)
	if err != nil {
		return err
	}
	l, err := s.lockerFor()
	if err != nil {
		return err
	}
	info, err := l.Inspect(ctx, key)
	if err != nil {
		return opErr("inspect "+printable(key), err)
	}
	t := newTable(stdout, "")
	t.row(info)
	return t.flush()
}

func list(ctx context.Context, s *session, args []string, stdout io.Writer) error {
	fs := quiet(flag.NewFlagSet("ls", flag.ContinueOnError))
	limit := fs.Int("limit", core.DefaultListLimit, "")
	args, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	var pattern string
	switch {
	case len(args) > 1:
		return usageErr("ls: one PATTERN expected, got %d arguments %q (quote the pattern so the shell does not expand it)", len(args), args)
	case len(args) == 1:
		pattern = args[0]
	}
	if *limit < 1 {
		return usageErr("ls: -limit %d is below 1", *limit)
	}
	l, err := s.lockerFor()
	if err != nil {
		return err
	}
	// One name more than shown tells whether the list was cut.
	names, err := l.List(ctx, pattern, max(*limit+1, *limit))
	if err != nil {
		return opErr("ls", err)
	}
	slices.Sort(names)
	cut := len(names) > *limit
	if cut {
		names = names[:*limit]
	}
	infos := make([]core.LockInfo, 0, len(names))
	for _, name := range names {
		info, err := l.Inspect(ctx, name)
		if err != nil {
			return opErr("ls: inspect "+printable(name), err)
		}
		infos = append(infos, info)
	}
	if len(infos) > 0 {
		t := newTable(stdout, "")
		for _, info := range infos {
			t.row(info)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	noun := "locks"
	if len(infos) == 1 {
		noun = "lock"
	}
	if cut {
		_, err = fmt.Fprintf(stdout, "(%d %s; limit reached)\n", len(infos), noun)
	} else {
		_, err = fmt.Fprintf(stdout, "(%d %s)\n", len(infos), noun)
	}
	return err
}

func release(ctx context.Context, s *session, args []string, stdout io.Writer) error {
	fs := quiet(flag.NewFlagSet("release", flag.ContinueOnError))
	force := fs.Bool("force", false, "")
	args, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	key, err := oneKey("release", args)
	if err != nil {
		return err
	}
	if !*force {
		return usageErr("release %s: refused without --force. Releasing another owner's lock is the last resort: "+
			"the holder, if alive, keeps running until its next renewal notices the loss, so two owners may act at once; "+
			"use it only when the holder is known to be gone (see lockgate help release)", printable(key))
	}
	l, err := s.lockerFor()
	if err != nil {
		return err
	}
	info, err := l.ForceRelease(ctx, key)
	switch {
	case errors.Is(err, core.ErrNotHeld):
		return opErr("release "+printable(key), fmt.Errorf("the lock changed hands after it was inspected (it was held with fence %d); nothing was removed: inspect it again", info.Fence))
	case err != nil && info.Held:
		return opErr("release "+printable(key), fmt.Errorf("%w (the hold with fence %d may or may not have been removed: inspect it)", err, info.Fence))
	case err != nil:
		return opErr("release "+printable(key), err)
	case !info.Held:
		t := newTable(stdout, "")
		t.row(info)
		if err := t.flush(); err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, "nothing held")
		return err
	}
	t := newTable(stdout, "removing:")
	t.row(info)
	if err := t.flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, "released")
	return err
}
