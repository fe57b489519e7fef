//go:build ignore

// The control of lockeronly_bad.go: a per-call option compiles.
package main

import (
	"time"

	"github.com/lockgate/lockgate/core"
	fiberlock "github.com/lockgate/lockgate/middleware/fiberv3"
)

func main() {
	_ = fiberlock.Config{LockOptions: []core.LockOption{core.WithTTL(time.Second)}}
}
