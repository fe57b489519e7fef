//go:build ignore

// The control of lockeronly_bad.go: a per-call option compiles.
package main

import (
	"time"

	"github.com/lockgate/lockgate/core"
	httplock "github.com/lockgate/lockgate/middleware/nethttp"
)

func main() {
	_ = httplock.WithLockOptions(core.WithTTL(time.Second))
}
