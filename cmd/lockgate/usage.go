package main

import (
	"fmt"
	"io"
	"strings"
)

const intro = `lockgate shows the locks a lockgate Locker keeps in Redis and, as a last
resort, removes one.

Usage:

	lockgate [global flags] <command> [arguments]

Commands:
`

const outro = `Columns: KEY the lock name; HELD yes or no; TTL its remaining time to
live in Redis (the holder's watchdog renews it every third of its TTL);
FENCE the holder's fencing token; AGE how long ago it was granted (by the
server's clock); WAITERS the callers queued for it; TRACE the trace id of
the holder's W3C traceparent tag (core.WithHolderTag, the otel module's),
or the raw tag. A free lock shows "-" but for its waiters.

Passwords: the first of -password, the -url's password,
LOCKGATE_REDIS_PASSWORD, REDISCLI_AUTH (redis-cli's variable) is sent
with -user (default the -url's user, else Redis's default user).
-password and a password in -url show in ps to other users of the
machine: prefer LOCKGATE_REDIS_PASSWORD. Sentinels that require their
own credentials take -sentinel-user and LOCKGATE_SENTINEL_PASSWORD.

-url names a single server: redis://[user:password@]host:port[/db], or
rediss:// for TLS (go-redis's ParseURL; of its query parameters only
client_name, db, protocol and skip_verify are taken). For a Cluster or
Sentinel over TLS or with an ACL user, use -cluster or -sentinel with
-tls, -user and the variables.

Exit status: 0 done; 1 runtime error (Redis unavailable, refusing the
credentials or the certificate, or not answering within -timeout; a
-tls-ca-file that cannot be read; the lock changed hands during
release); 2 usage error (unknown command, missing KEY, bad flag or
-url, release without --force).
`

// usage writes the whole usage text.
func usage(w io.Writer) {
	fmt.Fprint(w, intro)
	for _, c := range commands {
		commandUsage(w, c)
	}
	fmt.Fprint(w, "\n\thelp [COMMAND]\n\t\tShow this text, or one command's.\n\nGlobal flags (before the command):\n\n")
	fs := globalFlags(&config{})
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\nA KEY that starts with '-' goes after \"--\": lockgate inspect -- -key.\n\n", outro)
}

// commandUsage writes one command's synopsis and help.
func commandUsage(w io.Writer, c *command) {
	fmt.Fprintf(w, "\n\t%s\n", c.synopsis)
	for _, line := range strings.Split(c.help, "\n") {
		fmt.Fprintf(w, "\t\t%s\n", line)
	}
}

// shortUsage is what follows a usage error.
func shortUsage(w io.Writer) {
	line := "usage: lockgate [global flags]"
	for i, c := range commands {
		if i > 0 {
			line += " |"
		}
		line += " " + c.synopsis
	}
	fmt.Fprintln(w, line+" | help [COMMAND]")
	fmt.Fprintln(w, "run 'lockgate help' for the commands and flags")
}
