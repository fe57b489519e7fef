// Command lockgate shows the locks a lockgate Locker (package core) keeps
// in Redis and, as a last resort, removes one. It is an operator's tool.
//
//	lockgate [global flags] <command> [arguments]
//
//	lockgate inspect KEY               what Redis knows of one lock
//	lockgate ls [-limit N] [PATTERN]   the locks matching a Redis glob, sorted, at most N (100)
//	lockgate release KEY --force       remove the lock, whoever holds it: the last resort
//	lockgate help [COMMAND]            the usage text (also -h)
//
// The global flags name the deployment and bound the command: -addr
// host:port for a single server (default 127.0.0.1:6379), -cluster
// host:port,... for a Redis Cluster, -sentinel host:port,... with -master
// NAME for Sentinel; -password, -db; -prefix, the key prefix of the
// Lockers (default "lockgate:", core.DefaultPrefix); -timeout, the deadline
// of the whole command (default 5s).
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
// Exit status: 0 done; 1 runtime error (Redis unavailable or not answering
// within -timeout, the lock changed hands); 2 usage error (unknown command,
// missing KEY, bad flag, release without --force).
package main
