// This program must not compile: WithPrefix is a Locker option (core.Option),
// not a core.LockOption, so it cannot be passed to Lock. TestLockerOnlyOptionDoesNotCompile
// builds it and expects the compiler to refuse.
package main

import (
	"context"

	"github.com/lockgate/lockgate/core"
	"github.com/redis/go-redis/v9"
)

func main() {
	l, _ := core.New(redis.NewClient(&redis.Options{}))
	_, _ = l.Lock(context.Background(), "k", core.WithPrefix("x:"))
}
