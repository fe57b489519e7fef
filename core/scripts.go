package core

import (
	"context"
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var luaFiles embed.FS

// lua is the source of scripts/<name>.lua.
func lua(name string) string {
	b, err := luaFiles.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic(err) // embedded: cannot happen
	}
	return string(b)
}

var (
	acquireSrc      = lua("acquire")
	releaseSrc      = lua("release")
	renewSrc        = lua("renew")
	pttlSrc         = lua("pttl")
	fenceSrc        = lua("fence")
	inspectSrc      = lua("inspect")
	queueSrc        = lua("queue")
	clockSrc        = lua("clock")
	rwSrc           = lua("rw")
	rlockAcquireSrc = lua("rlock_acquire")
	rlockReleaseSrc = lua("rlock_release")

	acquireScript      = newScript(withQueue(acquireSrc, queueSrc))
	releaseScript      = newScript(withQueue(releaseSrc, queueSrc))
	rlockAcquireScript = newScript(withQueue(rlockAcquireSrc, queueSrc))
	rlockReleaseScript = newScript(withQueue(rlockReleaseSrc, queueSrc))
	renewScript        = newScript(renewSrc)
	pttlScript         = newScript(pttlSrc)
	fenceScript        = newScript(fenceSrc)
	inspectScript      = newScript(inspectSrc)
)

// script is a Lua script as the Locker sends it: by its SHA1 (EVALSHA), and
// by its source when the server's script cache lacks it.
type script struct {
	src string
	sha any // its SHA1, boxed once for every call's arguments
}

func newScript(src string) *script { return &script{src: src, sha: redis.NewScript(src).Hash()} }

// once is a command the client sends at most once: a lock script's caller
// must know whether its call may have run, so go-redis must not re-send it
// (MaxRetries); redirects (MOVED, ASK, READONLY) still happen. See
// docs/internals.md, "Scripts are sent at most once".
type once struct{ *redis.Cmd }

func (once) NoRetry() bool { return true }

// cmd returns the EVALSHA command of s with keys and args, as once. Its
// arguments are copied, so that callers can build keys and args on their
// stack: the command's own is the one slice allocated.
func (s *script) cmd(ctx context.Context, keys []any, args []any) once {
	argv := make([]any, 0, 3+len(keys)+len(args))
	argv = append(argv, "evalsha", s.sha, len(keys))
	argv = append(argv, keys...)
	argv = append(argv, args...)
	return once{redis.NewCmd(ctx, argv...)}
}

// evalFallback turns q's EVALSHA into EVAL with the source, for a server
// whose cache lacked the script (a restart, a failover, SCRIPT FLUSH).
func (s *script) evalFallback(ctx context.Context, q once) once {
	argv := q.Args()
	argv[0], argv[1] = "eval", s.src
	return once{redis.NewCmd(ctx, argv...)}
}

// processor is what sends a command: a client, a node's client or a
// pipeline.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// run sends s once with keys and args on c (EVALSHA, then EVAL if the
// server lacks the script) and returns its answered command.
func (s *script) run(ctx context.Context, c processor, keys []any, args ...any) *redis.Cmd {
	return s.send(ctx, c, s.cmd(ctx, keys, args))
}

// send sends q, a command of s (see cmd), once on c, then as EVAL if the
// server lacks the script, and returns its answered command.
func (s *script) send(ctx context.Context, c processor, q once) *redis.Cmd {
	_ = c.Process(ctx, q)
	if noScript(q.Err()) {
		q = s.evalFallback(ctx, q)
		_ = c.Process(ctx, q)
	}
	return q.Cmd
}

func noScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// sharedMark is the line of a script where withQueue splices the shared
// functions: what comes before it, the common case's fast path, runs
// without defining them (Redis pays a closure per function defined, each
// call: 2-4µs of a script's time with all of them).
const sharedMark = "-- (shared functions)\n"

// withQueue splices the shared functions into a script's source: the
// clock's (clock.lua) after its first line (the #!lua flags line, which
// must stay first), and those of the queue (queue, the source of queue.lua
// or a mutant's), of holders (semaphore.lua) and of readers (rw.lua) at
// its sharedMark line, or after the clock's when it has none.
func withQueue(src, queue string) string {
	flags, body, _ := strings.Cut(src, "\n")
	fast, rest, ok := strings.Cut(body, sharedMark)
	if !ok {
		fast, rest = "", body
	}
	return flags + "\n" + clockSrc + fast + queue + semSrc + rwSrc + rest
}

// scripts are the lock's acquire and release scripts and the semaphore's
// acquire script a backend sends: the package's own, or a mutant's (see
// mutants.go).
type scripts struct{ acquire, release, semAcquire *script }

var queueScripts = scripts{acquireScript, releaseScript, semAcquireScript}

// scriptCall is one script call sent in a pipeline: cmd is its EVALSHA
// (see script.cmd), answered once the pipeline returns, or the EVAL that
// replaced it.
type scriptCall struct {
	script *script
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
				o := once{q.cmd}
				if !sha {
					o = q.script.evalFallback(ctx, o)
					q.cmd = o.Cmd
				}
				_ = p.Process(ctx, o)
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
		if noScript(q.cmd.Err()) {
			missing = append(missing, q)
		}
	}
	if len(missing) > 0 {
		send(missing, false)
	}
}
