package locktest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/redistest"
)

// Locker returns core.New(client, opts...), failing the test on an error,
// closed at cleanup.
func Locker(t testing.TB, client redis.UniversalClient, opts ...core.Option) *core.Locker {
	t.Helper()
	l, err := core.New(client, opts...)
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// NewLocker returns a Locker with its own client to srv (returned too, for
// looking at Redis directly), closed at cleanup.
func NewLocker(t testing.TB, srv *redistest.Server, opts ...core.Option) (*core.Locker, *redis.Client) {
	t.Helper()
	c := srv.Client(t)
	return Locker(t, c, opts...), c
}

// ProxiedLocker returns a Locker whose client reaches srv through a fault
// proxy of its own (closed with t), and the proxy.
func ProxiedLocker(t testing.TB, srv *redistest.Server, opts ...core.Option) (*core.Locker, *redistest.Proxy) {
	t.Helper()
	p := redistest.StartProxy(t, srv.Addr)
	c := redis.NewClient(&redis.Options{Addr: p.Addr})
	t.Cleanup(func() { c.Close() })
	return Locker(t, c, opts...), p
}

// Cycle locks key with l and unlocks it, failing b on an error: the core
// cycle the adapters' benchmarks compare a locked route with.
func Cycle(b *testing.B, l *core.Locker, key string) {
	ctx := context.Background()
	lease, err := l.Lock(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		b.Fatal(err)
	}
}

// RedisKey is the Redis key of the lock named name under the default
// prefix: "lockgate:{name}", with '%' and '}' in name escaped as core
// escapes them ("%25", "%7D") to keep the hash tag whole.
func RedisKey(name string) string { return PrefixedKey(core.DefaultPrefix, name) }

// PrefixedKey is RedisKey under the Locker prefix prefix.
func PrefixedKey(prefix, name string) string {
	return prefix + "{" + strings.NewReplacer("%", "%25", "}", "%7D").Replace(name) + "}"
}

// Held reports whether the lock named name exists in Redis (EXISTS on
// RedisKey(name), asked with client directly), failing the test if Redis
// cannot answer.
func Held(t testing.TB, ctx context.Context, client redis.UniversalClient, name string) bool {
	t.Helper()
	n, err := client.Exists(ctx, RedisKey(name)).Result()
	if err != nil {
		t.Fatalf("EXISTS %s: %v", RedisKey(name), err)
	}
	return n == 1
}

// Warm locks and unlocks "warm" with l: a Locker's first lock also checks
// the server and loads the scripts, which a short wait on a loaded machine
// does not always cover. It leaves the slot's fence floor in Redis.
func Warm(t testing.TB, l *core.Locker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := l.Lock(ctx, "warm", core.WithWait(20*time.Second)) // Lockers of one server warm up side by side
	if err == nil {
		err = s.Unlock(ctx)
	}
	if err != nil {
		t.Fatalf("warm-up: %v", err)
	}
}

// Holder reads the owner and fence a lock hash names, in either of its forms
// (docs/design.md, "Redis layout"): full (owner and fence fields) or lean
// (one field, named by the owner, valued by the fence). "" when it names none.
func Holder(ctx context.Context, c redis.Cmdable, hash string) (owner, fence string, err error) {
	m, err := c.HGetAll(ctx, hash).Result()
	if err != nil {
		return "", "", err
	}
	owner, fence = m["owner"], m["fence"]
	if owner == "" && len(m) == 1 {
		for owner, fence = range m {
		}
	}
	return owner, fence, nil
}
