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
	acquireSrc = lua("acquire")
	releaseSrc = lua("release")
	queueSrc   = lua("queue")
	clockSrc   = lua("clock")
	rwSrc      = lua("rw")

	acquireScript      = newScript(withQueue(acquireSrc, queueSrc))
	releaseScript      = newScript(withQueue(releaseSrc, queueSrc))
	rlockAcquireScript = newScript(withQueue(lua("rlock_acquire"), queueSrc))
	rlockReleaseScript = newScript(withQueue(lua("rlock_release"), queueSrc))
	renewScript        = newScript(lua("renew"))
	pttlScript         = newScript(lua("pttl"))
	fenceScript        = newScript(lua("fence"))
	inspectScript      = newScript(withQueue(lua("inspect"), queueSrc))
)

// script is a Lua script, sent by SHA1 (EVALSHA), or by source if uncached.
type script struct {
	src string
	sha any // its SHA1, boxed once for every call's arguments
}

func newScript(src string) *script { return &script{src: src, sha: redis.NewScript(src).Hash()} }

// once is a command go-redis never re-sends (redirects still happen), so its
// caller knows whether it may have run. See docs/internals.md, "Scripts are sent at most once".
type once struct{ *redis.Cmd }

func (once) NoRetry() bool { return true }

// cmd returns s's EVALSHA with keys and args, as once. It copies them, so
// callers may build keys and args on their stack.
func (s *script) cmd(ctx context.Context, keys []any, args []any) once {
	argv := make([]any, 0, 3+len(keys)+len(args))
	argv = append(argv, "evalsha", s.sha, len(keys))
	argv = append(argv, keys...)
	argv = append(argv, args...)
	return newOnce(ctx, argv)
}

// newOnce makes the command argv as once. Its step count is set: a go-redis
// (v9.23) Cluster client otherwise looks it up in its cache of COMMAND's
// reply, which it loads on first use from a node it picks, under a mutex and
// past the caller's deadline, so that one hung node would hold up every call.
// A script's step count is unused (no routing policy names EVALSHA).
func newOnce(ctx context.Context, argv []any) once {
	c := redis.NewCmd(ctx, argv...)
	c.SetStepCount(1)
	return once{c}
}

// evalFallback turns q's EVALSHA into EVAL with s's source (NOSCRIPT).
func (s *script) evalFallback(ctx context.Context, q once) once {
	argv := q.Args()
	argv[0], argv[1] = "eval", s.src
	return newOnce(ctx, argv)
}

// run sends s once with keys and args on c (see send).
func (s *script) run(ctx context.Context, c redis.UniversalClient, keys []any, args ...any) *redis.Cmd {
	return s.send(ctx, c, s.cmd(ctx, keys, args))
}

// send sends q, s's cmd, once on c, then as EVAL if the server lacks s
// (s nil: q is a plain command).
func (s *script) send(ctx context.Context, c redis.UniversalClient, q once) *redis.Cmd {
	_ = c.Process(ctx, q)
	if s != nil && noScript(q.Err()) {
		q = s.evalFallback(ctx, q)
		_ = c.Process(ctx, q)
	}
	return q.Cmd
}

func noScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// sharedMark is where withQueue splices the shared functions: the fast path
// before it defines none (Redis makes a closure per function, every call).
const sharedMark = "-- (shared functions)\n"

// withQueue splices clock.lua after src's first line (#!lua flags stay first),
// then queue (queue.lua or a mutant's), semaphore.lua and rw.lua at sharedMark.
func withQueue(src, queue string) string {
	flags, body, _ := strings.Cut(src, "\n")
	fast, rest, ok := strings.Cut(body, sharedMark)
	if !ok {
		fast, rest = "", body
	}
	return flags + "\n" + clockSrc + fast + queue + semSrc + rwSrc + rest
}

// scripts are the acquire, release and semaphore acquire scripts a backend
// sends: the package's own, or a mutant's.
type scripts struct{ acquire, release, semAcquire *script }

var queueScripts = scripts{acquireScript, releaseScript, semAcquireScript}

// scriptCall is one script call in a pipeline: cmd is its EVALSHA, or the
// EVAL that replaced it (script nil: a plain command).
type scriptCall struct {
	script *script
	cmd    *redis.Cmd
}

// pipeScripts sends calls as one pipeline of EVALSHAs, then those NOSCRIPT
// refused again as EVAL; after (if not nil) ends each pipeline.
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
		if q.script != nil && noScript(q.cmd.Err()) {
			missing = append(missing, q)
		}
	}
	if len(missing) > 0 {
		send(missing, false)
	}
}
