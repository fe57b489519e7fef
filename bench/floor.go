package bench

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// casDel is the compare-and-delete of the floor, sent as EVALSHA (EVAL
// once, when the script is not cached yet).
var casDel = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// floorLocker is the floor of any safe Redis lock: SET key tok NX PX, then
// a compare-and-delete script, through go-redis — two round trips, no
// waiting, no renewal, nothing else. Uncontended cycles are reported as a
// ratio to it.
type floorLocker struct{ c redis.UniversalClient }

func openFloor(e *env, _ int, cnt *counters) (locker, error) {
	c := e.client(cnt, true)
	if err := casDel.Load(context.Background(), c).Err(); err != nil {
		c.Close()
		return nil, err
	}
	return &floorLocker{c: c}, nil
}

func (f *floorLocker) do(ctx context.Context, key string, _ time.Duration, fn func()) error {
	ok, err := f.c.SetNX(ctx, key, "tok", 30*time.Second).Result()
	if err != nil {
		return err
	}
	if !ok {
		return errBusy
	}
	if fn != nil {
		fn()
	}
	if err := casDel.Run(context.Background(), f.c, []string{key}, "tok").Err(); err != nil {
		return releaseErr(err)
	}
	return nil
}

func (f *floorLocker) close() { f.c.Close() }
