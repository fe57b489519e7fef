//go:build ignore

// A Locker-only option (core.WithPrefix) given as a per-route lock option:
// it must not compile (TestLockerOnlyOptionDoesNotCompile).
package main

import (
	"github.com/lockgate/lockgate/core"
	ginlock "github.com/lockgate/lockgate/middleware/gin"
)

func main() {
	_ = ginlock.WithLockOptions(core.WithPrefix("app:"))
}
