package fence

import (
	"context"
	_ "embed"
	"errors"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/guard.lua
var guardSrc string

// staleReply is the error reply of guard.lua for a stale fence, followed by
// the recorded fence.
const staleReply = "LOCKGATE_STALE_FENCE "

// KeyPrefix starts the Redis key of every fence record a Script keeps (see
// Key).
const KeyPrefix = "lockgate:fence:"

// Key returns the Redis key of resource's fence record: KeyPrefix followed
// by resource, itself in braces unless it has a hash tag already
// ("lockgate:fence:{order:42}"), so that on a Redis Cluster the record sits
// in the slot of the keys named with the same tag ("{order:42}:status"). A
// Script's data keys must share that slot (Redis refuses a script whose
// keys are in several slots: CROSSSLOT).
func Key(resource string) string {
	if i := strings.IndexByte(resource, '{'); i >= 0 {
		if j := strings.IndexByte(resource[i+1:], '}'); j > 0 {
			return KeyPrefix + resource
		}
	}
	return KeyPrefix + "{" + resource + "}"
}

// Script is a Lua script for Redis data that runs only if its fence is the
// highest seen for its resource: in the same atomic call, a check first
// records the fence in the resource's record (Key) or refuses it, before the
// script's own body runs. Being one script, the check and the write cannot
// be separated by another writer.
//
// The record is a plain string key that never expires: delete it with the
// data it guards. It protects the data only while Redis keeps both: when the
// Redis of the data forgets the record (a restart without persistence, a
// FLUSHALL), it forgets the data too, and a stale write is let through
// again.
type Script struct {
	script *redis.Script
}

// NewScript returns the guarded form of the Lua script src, written as for
// redis.NewScript: its KEYS and ARGV are the keys and args given to Run. The
// fence check is put before it (a "#!lua" first line is kept first).
func NewScript(src string) *Script {
	head := ""
	if strings.HasPrefix(src, "#!") {
		head, src, _ = strings.Cut(src, "\n")
		head += "\n"
	}
	body := head + guardSrc +
		"return (function(KEYS, ARGV)\n" + src + "\nend)({unpack(KEYS, 2)}, {unpack(ARGV, 2)})\n"
	return &Script{script: redis.NewScript(body)}
}

// Run runs the script on c (a *redis.Client, *redis.ClusterClient, a
// pipeline…) for resource with fence, keys and args: EVALSHA, and EVAL when
// the server does not have the script yet. Give the lease's key and fence
// (lease.Key(), lease.Fence()).
//
// The result is the script's. Its error is a *StaleError
// (errors.Is(cmd.Err(), ErrStale)) when a higher fence is recorded for
// resource, and then nothing was written; ErrInvalid (wrapped) for a fence
// <= 0 or a resource that is empty or over MaxResourceLen bytes, nothing
// sent; else Redis's or the client's. An equal fence passes: a client that
// sends the call again after a timeout (go-redis's MaxRetries) runs the body
// again, so write it to be run twice, or give the client MaxRetries -1.
func (s *Script) Run(ctx context.Context, c redis.Scripter, resource string, fence int64, keys []string, args ...any) *redis.Cmd {
	if err := checkArgs(resource, fence); err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	k := make([]string, 0, 1+len(keys))
	k = append(append(k, Key(resource)), keys...)
	a := make([]any, 0, 1+len(args))
	a = append(append(a, fence), args...)
	cmd := s.script.Run(ctx, c, k, a...)
	if err := cmd.Err(); err != nil {
		if stale := staleError(err, resource, fence); stale != nil {
			cmd.SetErr(stale)
		}
	}
	return cmd
}

// staleError reads guard.lua's refusal.
func staleError(err error, resource string, fence int64) *StaleError {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return nil
	}
	rest, ok := strings.CutPrefix(rerr.Error(), staleReply)
	if !ok {
		return nil
	}
	highest, _ := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
	return &StaleError{Resource: resource, Fence: fence, Highest: highest}
}
