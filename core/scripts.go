package core

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/renew.lua
	renewSrc string
	//go:embed scripts/pttl.lua
	pttlSrc string
	//go:embed scripts/fence.lua
	fenceSrc string

	acquireScript = redis.NewScript(acquireSrc)
	releaseScript = redis.NewScript(releaseSrc)
	renewScript   = redis.NewScript(renewSrc)
	pttlScript    = redis.NewScript(pttlSrc)
	fenceScript   = redis.NewScript(fenceSrc)
)
