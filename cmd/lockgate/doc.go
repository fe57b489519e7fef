// Command lockgate shows the locks a lockgate Locker (package core) keeps
// in Redis and, as a last resort, removes one. It is an operator's tool.
//
//	lockgate [global flags] <command> [arguments]
//
//	lockgate ping                      check the deployment; print "ok: " and what it reached
//	lockgate inspect KEY               what Redis knows of one lock
//	lockgate ls [-limit N] [PATTERN]   the locks matching a Redis glob, sorted, at most N (100)
//	lockgate release KEY --force       remove the lock, whoever holds it: the last resort
//	lockgate help [COMMAND]            the usage text (also -h)
//
// The global flags name the deployment and bound the command: -addr
// host:port for a single server (default 127.0.0.1:6379), or -url
// redis://[user:password@]host:port[/db] (rediss:// for TLS) for a single
// server, -cluster host:port,... for a Redis Cluster, -sentinel
// host:port,... with -master NAME for Sentinel; -db; -prefix, the key
// prefix of the Lockers (default "lockgate:", core.DefaultPrefix);
// -timeout, the deadline of the whole command (default 5s).
//
// # Managed Redis: TLS, ACL users, passwords
//
// -url is parsed by go-redis's redis.ParseURL and names a single server
// only (a Cluster or Sentinel is named by -cluster or -sentinel with the
// flags below). Of its query parameters lockgate takes client_name, db,
// protocol and skip_verify (rediss:// only, as -tls-insecure-skip-verify);
// it refuses the others (timeouts, retries, pool sizes), which -timeout
// and its own settings would replace. Errors show the URL with its
// password masked.
//
// -tls turns TLS on for -addr, -cluster and -sentinel (every node and
// sentinel); a rediss:// URL turns it on by itself. With TLS,
// -tls-ca-file FILE verifies the servers against the PEM CA bundle in FILE
// instead of the system's roots, -tls-server-name NAME checks the
// certificates for NAME instead of the host of each address dialled, and
// -tls-insecure-skip-verify skips the verification (for tests and
// self-signed certificates only: anyone on the path can read and change
// the traffic, password included). TLS 1.2 or later; no client
// certificate.
//
// -user NAME authenticates as an ACL user (AUTH NAME PASSWORD; default
// the URL's user, else Redis's default user). The password comes from the
// first of: -password, the URL's password, the environment variable
// LOCKGATE_REDIS_PASSWORD, redis-cli's REDISCLI_AUTH (an empty variable
// counts as unset). -password and a password in -url show in ps to every
// user of the machine: prefer the variable. With Sentinel, user and
// password are the master's; sentinels that require their own take
// -sentinel-user and LOCKGATE_SENTINEL_PASSWORD. A refused AUTH (WRONGPASS,
// NOAUTH) is reported with the user and where the password came from,
// never the password.
//
// inspect and ls print one row per lock:
//
//	KEY      HELD  TTL      FENCE             AGE     WAITERS  TRACE
//	order:1  yes   29.71s   1731340800123456  290ms   1        4bf92f3577b34da6a3ce929d0e0e4736
//	order:2  no    -        -                 -       0        -
//
// TTL is the lock's remaining time to live in Redis (the holder's watchdog
// renews it every third of its TTL), FENCE the holder's fencing token, AGE
// how long ago it was granted, WAITERS the callers queued for it, TRACE the
// trace id of the holder's W3C traceparent tag (core.WithHolderTag) or the
// raw tag. ls ends with a count, "(N locks; limit reached)" when more
// locks match than -limit lets it show.
//
// release removes the hold it finds and hands the lock to the first live
// waiter; it refuses (exit 2) without --force. It is the last resort: the
// holder, if alive, keeps running until its next renewal notices the loss,
// so two owners may act at once until then. Use it only when the holder is
// known to be gone and its TTL is too long to wait for. If the lock changes
// hands between the inspection and the release, nothing is removed (exit 1).
//
// Exit status: 0 done; 1 runtime error (Redis unavailable, refusing the
// credentials or the certificate, or not answering within -timeout; a
// -tls-ca-file that cannot be read; the lock changed hands); 2 usage error
// (unknown command, missing KEY, bad flag or -url, release without
// --force).
package main
