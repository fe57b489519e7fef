package core_test

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// semKey is the Redis key of the holders of the semaphore named name.
func semKey(name string) string { return "lockgate:{" + name + "}:sem" }

// semHolders counts the live permits of the semaphore named name in Redis
// (its hash's fields but the permits count, whose expiry has not passed).
func semHolders(t *testing.T, c redis.UniversalClient, name string) int {
	t.Helper()
	ctx := context.Background()
	m, err := c.HGetAll(ctx, semKey(name)).Result()
	if err != nil {
		t.Fatal(err)
	}
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k, v := range m {
		if k == "n" {
			continue
		}
		exp, _, _ := strings.Cut(v, "|")
		if ms, _ := strconv.ParseInt(exp, 10, 64); ms > now.UnixMilli() {
			n++
		}
	}
	return n
}

// semScript matches the semaphore's script "acquire" or "release" on the
// semaphore named name.
func semScript(name, sem string) redistest.Matcher {
	return redistest.MatchCommand("evalsha", fmt.Sprintf("%x", sha1.Sum([]byte(core.SemaphoreScriptSource(name)))), semKey(sem))
}

func TestSemaphoreBasics(t *testing.T) {
	srv := redistest.Start(t)
	l, direct := locktest.NewLocker(t, srv)
	ctx := locktest.Context(t)
	var leases []*core.Lease
	for i := 0; i < 3; i++ {
		s, err := l.Semaphore(ctx, "basic", 3)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, s)
	}
	if n := semHolders(t, direct, "basic"); n != 3 {
		t.Fatalf("%d holders in Redis, want 3", n)
	}
	_, err := l.Semaphore(ctx, "basic", 3, core.WithWait(core.NoWait))
	var be *core.BusyError
	if !errors.Is(err, core.ErrNotObtained) || !errors.As(err, &be) {
		t.Fatalf("a fourth permit of three = %v, want a *BusyError", err)
	}
	if d, err := leases[0].TTL(ctx); err != nil || d <= 0 {
		t.Fatalf("TTL = %v, %v", d, err)
	}
	if err := leases[0].Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, s := range leases {
		if err := s.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if keys := direct.Keys(ctx, "lockgate:{basic}*").Val(); len(keys) != 0 {
		t.Fatalf("left in Redis after every permit was released: %v", keys)
	}
	_ = sync.Mutex{}
	_ = atomic.Int32{}
}
