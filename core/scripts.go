package core

import (
	"context"
	_ "embed"
	"strings"

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
	//go:embed scripts/inspect.lua
	inspectSrc string
	//go:embed scripts/queue.lua
	queueSrc string

	acquireScript = redis.NewScript(withQueue(acquireSrc, queueSrc))
	releaseScript = redis.NewScript(withQueue(releaseSrc, queueSrc))
	renewScript   = redis.NewScript(renewSrc)
	pttlScript    = redis.NewScript(pttlSrc)
	fenceScript   = redis.NewScript(fenceSrc)
	inspectScript = redis.NewScript(inspectSrc)
)

// withQueue splices the queue's shared functions (queue, the source of
// queue.lua) into a script's source, after its first line (the #!lua flags
// line, which must stay first).
func withQueue(src, queue string) string {
	flags, body, _ := strings.Cut(src, "\n")
	return flags + "\n" + queue + body
}

// scripts are the acquire and release scripts a backend sends: the
// package's own, or a mutant's (see mutants.go).
type scripts struct{ acquire, release *redis.Script }

var queueScripts = scripts{acquireScript, releaseScript}

// scriptCall is one script call sent in a pipeline; cmd is its answer.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
}

// pipeScripts sends calls as one pipeline of EVALSHAs, after's commands (if
// any) at its end; then the calls the server's script cache lacked
// (NOSCRIPT: a restart, a failover, SCRIPT FLUSH) once more with their
// source, again followed by after's commands.
func pipeScripts(ctx context.Context, c redis.Cmdable, calls []*scriptCall, after func(redis.Pipeliner)) {
	send := func(calls []*scriptCall, sha bool) {
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, q := range calls {
				if sha {
					q.cmd = q.script.EvalSha(ctx, p, q.keys, q.args...)
				} else {
					q.cmd = q.script.Eval(ctx, p, q.keys, q.args...)
				}
			}
			if after != nil {
				after(p)
			}
			return nil
		})
	}
	send(calls, true)
	var missing []*scriptCall
	for _, q := range calls {
		if err := q.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			missing = append(missing, q)
		}
	}
	if len(missing) > 0 {
		send(missing, false)
	}
}
