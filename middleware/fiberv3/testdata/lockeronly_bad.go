//go:build ignore

// A Locker-only option (core.WithPrefix) given as a per-route lock option:
// it must not compile (TestLockerOnlyOptionDoesNotCompile).
package main

import (
	"github.com/lockgate/lockgate/core"
	fiberlock "github.com/lockgate/lockgate/middleware/fiberv3"
)

func main() {
	_ = fiberlock.Config{LockOptions: []core.LockOption{core.WithPrefix("app:")}}
}
