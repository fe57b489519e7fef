// Package redistest starts real redis-server processes for tests: on free
// loopback ports, without persistence, each in its own temporary directory,
// and stopped when the test (or TestMain) ends. It never touches a Redis it
// did not start, so it is safe on a machine that runs one on 6379.
//
// Besides single servers it starts several independent ones (for Redlock and
// fault tests), a Cluster, and a master watched by Sentinels, and it injects
// faults on the real processes: Stop, Restart, Pause (SIGSTOP) and Resume
// (SIGCONT).
//
// A Proxy (StartProxy) sits between a client and a server and injects
// network faults: HoldReply lets Redis execute one chosen command but
// delivers its reply late, so that a go-redis client times out and retries
// it (the command runs twice), or until the test lets it go (Let);
// SetLatency delays every reply; Cut closes
// the connections, Stall hangs them, SetRefuse plays a dead host; Count
// tells how many commands of a name reached Redis.
//
// redis-server must be on PATH (Debian: apt-get install redis-server); when
// it is not, Start fails the test with a message saying so.
package redistest
