package rpcsuite

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// Env is one test's Redis world, the suite's and each interceptor's own
// tests' alike: a real redis-server, a client of it, a Locker on that
// client with the test's own key prefix, and the test service. The stack
// serving the service is the test's.
type Env struct {
	Redis  *redistest.Server
	RDB    *redis.Client // a direct client of Redis
	Locker *core.Locker
	// Prefix is the Locker's key prefix: "<name>-<test name>:", cut to
	// core.MaxPrefixLen.
	Prefix  string
	Service *Service
}

// NewEnv starts a redis-server and returns the Env on it: a Locker with
// the prefix of name (the package under test: "grpclock", ...) and t, and
// opts after the prefix, closed at t's cleanup; a new Service.
func NewEnv(t testing.TB, name string, opts ...core.Option) *Env {
	t.Helper()
	srv := redistest.Start(t)
	return NewEnvOn(t, name, srv, srv.Client(t), opts...)
}

// NewEnvOn is NewEnv with a given server and client (for example a client
// with go-redis's default timeouts and retries).
func NewEnvOn(t testing.TB, name string, srv *redistest.Server, rdb *redis.Client, opts ...core.Option) *Env {
	t.Helper()
	prefix := name + "-" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()) + ":"
	if len(prefix) > core.MaxPrefixLen {
		prefix = prefix[:core.MaxPrefixLen]
	}
	l := locktest.Locker(t, rdb, append([]core.Option{core.WithPrefix(prefix)}, opts...)...)
	return &Env{Redis: srv, RDB: rdb, Locker: l, Prefix: prefix, Service: NewService()}
}

// LockKey is the Redis key of the lock named name.
func (e *Env) LockKey(name string) string { return locktest.PrefixedKey(e.Prefix, name) }

// Exists reports whether the Redis key k exists, read with the direct
// client.
func (e *Env) Exists(t testing.TB, k string) bool {
	t.Helper()
	n, err := e.RDB.Exists(context.Background(), k).Result()
	if err != nil {
		t.Fatalf("EXISTS %s: %v", k, err)
	}
	return n == 1
}

// LockKeys lists the lock hashes under the Env's prefix.
func (e *Env) LockKeys(t testing.TB) []string {
	t.Helper()
	keys, err := e.RDB.Keys(context.Background(), e.Prefix+"*").Result()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	var locks []string
	for _, k := range keys {
		// Lock hashes end with the hash tag; fence floors (":fence") and the
		// done markers of releases (":done:<owner>") are not locks.
		if strings.HasSuffix(k, "}") {
			locks = append(locks, k)
		}
	}
	return locks
}
