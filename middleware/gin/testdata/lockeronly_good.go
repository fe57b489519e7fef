//go:build ignore

// The control of TestLockerOnlyOptionDoesNotCompile: a per-call option in
// the same place compiles.
package main

import (
	"github.com/lockgate/lockgate/core"
	ginlock "github.com/lockgate/lockgate/middleware/gin"
)

func main() {
	_ = ginlock.WithLockOptions(core.WithoutWatchdog())
}
