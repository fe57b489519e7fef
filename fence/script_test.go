package fence_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/fence"
	"github.com/lockgate/lockgate/redistest"
)

// setScript is the guarded write of these tests: SET KEYS[1] ARGV[1].
const setSrc = "return redis.call('SET', KEYS[1], ARGV[1])"

// TestScriptStale: a write with a fence lower than the highest recorded
// for its resource is refused with a *StaleError naming that fence and
// writes nothing; an equal or higher fence writes; resources are
// independent. Control: the same body without the guard lets the stale
// write overwrite the newer one's value.
func TestScriptStale(t *testing.T) {
	c := redistest.Start(t).Client(t)
	ctx := context.Background()
	s := fence.NewScript(setSrc)
	write := func(resource string, f int64, value string) error {
		return s.Run(ctx, c, resource, f, []string{"{" + resource + "}:data"}, value).Err()
	}
	get := func(resource string) string { return c.Get(ctx, "{"+resource+"}:data").Val() }

	if err := write("order:1", 7, "seven"); err != nil {
		t.Fatal(err)
	}
	err := write("order:1", 3, "three")
	var stale *fence.StaleError
	if !errors.Is(err, fence.ErrStale) || !errors.As(err, &stale) {
		t.Fatalf("fence 3 after 7: %v, want a *StaleError", err)
	}
	if stale.Resource != "order:1" || stale.Fence != 3 || stale.Highest != 7 {
		t.Fatalf("StaleError %+v, want resource order:1, fence 3, highest 7", *stale)
	}
	if got := get("order:1"); got != "seven" {
		t.Fatalf("after the stale write the value is %q, want seven (nothing written)", got)
	}
	if err := write("order:1", 7, "seven again"); err != nil {
		t.Fatalf("an equal fence: %v, want it written", err)
	}
	if err := write("order:2", 3, "other"); err != nil {
		t.Fatalf("fence 3 on another resource: %v", err)
	}
	if err := write("order:1", 8, "eight"); err != nil || get("order:1") != "eight" {
		t.Fatalf("fence 8 after 7: %v, value %q", err, get("order:1"))
	}
	if got := c.Get(ctx, fence.Key("order:1")).Val(); got != "8" {
		t.Fatalf("record %s = %q, want 8", fence.Key("order:1"), got)
	}

	t.Run("control: unguarded", func(t *testing.T) {
		plain := redis.NewScript(setSrc)
		plain.Run(ctx, c, []string{"{order:3}:data"}, "eight")
		plain.Run(ctx, c, []string{"{order:3}:data"}, "three") // the stale holder's write
		if got := get("order:3"); got != "three" {
			t.Fatalf("unguarded: %q, want the stale write to land", got)
		}
	})
}

// TestScriptArgs: the body sees its own KEYS and ARGV (shifted past the
// fence record and the fence) and its result; invalid fences and
// resources are refused before anything is sent; a #!lua line stays
// first.
func TestScriptArgs(t *testing.T) {
	c := redistest.Start(t).Client(t)
	ctx := context.Background()
	echo := fence.NewScript("#!lua\nreturn {#KEYS, #ARGV, KEYS[1], ARGV[1], ARGV[2]}")
	got, err := echo.Run(ctx, c, "r", 5, []string{"{r}:a"}, "x", 9).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[1 2 {r}:a x 9]" {
		t.Fatalf("body saw %v, want [1 2 {r}:a x 9]", got)
	}
	for _, bad := range []struct {
		resource string
		fence    int64
	}{{"r", 0}, {"r", -1}, {"", 5}, {string(make([]byte, fence.MaxResourceLen+1)), 5}} {
		if err := echo.Run(ctx, c, bad.resource, bad.fence, nil).Err(); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("resource of %d bytes, fence %d: %v, want ErrInvalid", len(bad.resource), bad.fence, err)
		}
	}
	if n := c.Exists(ctx, fence.Key("")).Val(); n != 0 {
		t.Fatal("an invalid call wrote a record")
	}
	// A body's own error is the caller's, not a stale fence.
	boom := fence.NewScript("return redis.error_reply('BOOM no')")
	if err := boom.Run(ctx, c, "r", 6, nil).Err(); err == nil || errors.Is(err, fence.ErrStale) || err.Error() != "BOOM no" {
		t.Fatalf("body's error: %v, want BOOM no", err)
	}
}

// TestScriptRace: 8 writers with distinct fences race on one resource,
// each writing its fence as the value and appending it to a log; a write
// is admitted only while its fence is the highest so far, so the log
// increases and the final value is the highest fence. Control: the log
// of the same writers without the guard is in arrival order (it decreases
// somewhere in some of 20 rounds).
func TestScriptRace(t *testing.T) {
	c := redistest.Start(t).Client(t)
	ctx := context.Background()
	const body = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('RPUSH', KEYS[2], ARGV[1])"
	guarded, plain := fence.NewScript(body), redis.NewScript(body)
	race := func(round int, guard bool) []int64 {
		res := "race:" + strconv.Itoa(round)
		keys := []string{"{" + res + "}:v", "{" + res + "}:log"}
		var wg sync.WaitGroup
		for f := int64(1); f <= 8; f++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if guard {
					err = guarded.Run(ctx, c, res, f, keys, f).Err()
				} else {
					err = plain.Run(ctx, c, keys, f).Err()
				}
				if err != nil && !errors.Is(err, fence.ErrStale) {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		var log []int64
		for _, v := range c.LRange(ctx, keys[1], 0, -1).Val() {
			n, _ := strconv.ParseInt(v, 10, 64)
			log = append(log, n)
		}
		if guard && c.Get(ctx, keys[0]).Val() != "8" {
			t.Errorf("round %d: value %s, want 8 (the highest fence)", round, c.Get(ctx, keys[0]).Val())
		}
		return log
	}
	decreasing := func(log []int64) bool {
		for i := 1; i < len(log); i++ {
			if log[i] < log[i-1] {
				return true
			}
		}
		return false
	}
	for round := 0; round < 20; round++ {
		if log := race(round, true); decreasing(log) || len(log) == 0 || log[len(log)-1] != 8 {
			t.Fatalf("round %d: admitted %v, want increasing fences ending with 8", round, log)
		}
	}
	for round := 100; round < 120; round++ {
		if decreasing(race(round, false)) {
			return
		}
	}
	t.Fatal("control: 20 unguarded rounds all wrote in fence order; the guarded rounds prove nothing")
}

// TestKey: the record shares the resource's hash tag, or makes one of the
// whole resource.
func TestKey(t *testing.T) {
	for res, want := range map[string]string{
		"order:42":      "lockgate:fence:{order:42}",
		"{user:7}:cart": "lockgate:fence:{user:7}:cart",
		"a{}b":          "lockgate:fence:{a{}b}",
	} {
		if got := fence.Key(res); got != want {
			t.Errorf("Key(%q) = %q, want %q", res, got, want)
		}
	}
	if fence.MaxResourceLen != core.MaxKeyLen {
		t.Fatalf("MaxResourceLen %d, core.MaxKeyLen %d: a lease's key must fit", fence.MaxResourceLen, core.MaxKeyLen)
	}
}

// TestScriptLease: a lease's key and fence guard the write; after the
// lock is lost and taken again (the lease's data flushed), the old
// holder's write is refused.
func TestScriptLease(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	locker := core.Must(core.New(redis.NewClient(srv.Options())))
	t.Cleanup(func() { locker.Close() })
	ctx := context.Background()
	s := fence.NewScript(setSrc)
	old, err := locker.Lock(ctx, "order:9")
	if err != nil {
		t.Fatal(err)
	}
	// The lock's data is lost while old still runs (FLUSHALL would also
	// take the records; delete only the lock's keys).
	keys, _ := c.Keys(ctx, core.DefaultPrefix+"{order:9}*").Result()
	if len(keys) == 0 {
		t.Fatal("no lock keys found")
	}
	c.Del(ctx, keys...)
	newer, err := locker.Lock(ctx, "order:9")
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Unlock(ctx)
	if err := s.Run(ctx, c, newer.Key(), newer.Fence(), []string{"{order:9}:status"}, "newer").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Run(ctx, c, old.Key(), old.Fence(), []string{"{order:9}:status"}, "old").Err(); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("the lost lease's write: %v, want ErrStale", err)
	}
	old.Unlock(ctx)
}
