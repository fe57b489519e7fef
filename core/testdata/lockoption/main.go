// The control of testdata/lockeronly: the same program with a per-call
// option compiles.
package main

import (
	"context"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/redis/go-redis/v9"
)

func main() {
	l, _ := core.New(redis.NewClient(&redis.Options{}), core.WithPrefix("x:"), core.WithTTL(time.Second))
	_, _ = l.Lock(context.Background(), "k", core.WithTTL(time.Second))
}
