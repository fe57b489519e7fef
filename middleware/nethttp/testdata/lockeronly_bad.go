//go:build ignore

// A Locker-only option (core.WithPrefix) given as a per-route lock option:
// it must not compile (TestLockerOnlyOptionDoesNotCompile).
package main

import (
	"github.com/lockgate/lockgate/core"
	httplock "github.com/lockgate/lockgate/middleware/nethttp"
)

func main() {
	_ = httplock.WithLockOptions(core.WithPrefix("app:"))
}
