package locktest

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
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

// RedisKey is the Redis key of the lock named name under the default
// prefix: "lockgate:{name}", with '%' and '}' in name escaped as core
// escapes them ("%25", "%7D") to keep the hash tag whole.
func RedisKey(name string) string {
	return core.DefaultPrefix + "{" + strings.NewReplacer("%", "%25", "}", "%7D").Replace(name) + "}"
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
