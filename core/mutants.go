package core

import (
	"fmt"
	"slices"
	"strings"
)

// mutants are fixed defects put back on purpose, so a test or the fault rig
// can show that its check fails without the fix. Off unless set by a test
// (export_test.go) or, in a lockgate_mutants build, by LOCKGATE_MUTANTS.
// See docs/internals.md, "Mutants".
type mutants struct {
	// late-grant: a too-late grant is undone but the wait keeps its owner
	lateGrant bool
	// drop-early: a grant published before its waiter joined the room is dropped
	dropEarly bool
	// forget-left: the room forgets a lock and its grants when the last waiter leaves
	forgetLeft bool
	// merge-subs: one SSUBSCRIBE per node, its CROSSSLOT refusal swallowed
	mergeSubs bool
	// stay-subscribed: a channel the server unsubscribed counts as subscribed
	staySubscribed bool
	// restart-refresh: each grant to another waiter postpones a waiter's refresh
	restartRefresh bool
	// no-nudge: a grant to another waiter wakes none of the lock's waiters
	noNudge bool
	// late-join-blind: a waiter joining after another's grant is not told of it
	lateJoinBlind bool
	// no-turns: every Redlock waiter of a lock tries at each release
	noTurns bool
	// check-owner: the (re)subscription check wakes only a waiter that holds
	checkOwner bool
	// no-monitor: no connection watches the nodes leases are held on
	noMonitor bool
	// refusal-definitive: a failed dial ends a waiting Lock on every client
	refusalDefinitive bool
	// no-slot-reload: a failed Cluster dial does not reload the slot map
	noSlotReload bool
	// keep-entry: a queued waiter failing before Redis leaves its entry live
	keepEntry bool
	// keep-straggler: a busy Redlock TryLock keeps a slow node's later grant
	keepStraggler bool
	// retry-stray: a busy Redlock attempt with a stray grant retries as a split
	retryStray bool
	// blind-release: a Redlock release leaves no done marker though a node's
	// acquire, or a renewal's re-take, may still run unseen
	blindRelease bool
	// unbounded-retake: a Redlock renewal's re-take of a node waits for the
	// client's own timeouts, which a hung node makes outlast the lease
	unboundedRetake bool
	// dial-never-ran: a Redlock failure counts as never run when any node's
	// dial failed, though another node ran the call
	dialNeverRan bool
	// skip-raise: a Redlock holder never raises its nodes' fence floors, as if a quorum had issued its fence
	skipRaise bool
	// load-slots: joining the room may load a Cluster's slot map, past the budget
	loadSlots bool
	// check-inline: a Redlock Locker checks its first node inline, in the budget
	checkInline bool
	// forget-free: the room does not note the last "f" (lock free)
	forgetFree bool
	// stay-on-master: a Sentinel shard stays subscribed on a demoted master
	stayOnMaster bool
	// wake-on-idle: releasing the last hold always wakes the scheduler
	wakeOnIdle bool
	// keep-late-renewal: late renewals count; unanswered ones are not given back
	keepLateRenewal bool
	// first-ctx-only: only the first Lock's ctx ending stops renewals
	firstCtxOnly bool
	// retry-at-expiry: a failing queued waiter retries every ms past the holder's TTL
	retryAtExpiry bool
	// no-redlock-backoff: a Redlock waiter short of answers always retries in 1–11ms
	noRedlockBackoff bool
	// timer-only: a lease's context learns of its hold's end only when it is
	// cancelled (by the watchdog's goroutine, or after the first lease's)
	timerOnly bool
	// cmd-info: a Cluster call's step count is looked up in go-redis's
	// COMMAND cache, loaded from a node it picks, past the caller's budget
	cmdInfo bool
	// check-any-node: a Cluster Locker checks its server on a node the client
	// picks, not the key's master
	checkAnyNode bool
	// close-forgets: Close takes a hold a reader found lost for held, unreported
	closeForgets bool
	// one-pipe: a Cluster Locker coalesces the calls of every master in one queue
	onePipe bool
	// no-redirect: a Cluster Locker's coalesced calls go to the master the
	// slot map names, not through the Cluster client, so a call whose slot
	// moved fails (MOVED)
	noRedirect bool
	// trust-readonly: a ReadOnly Cluster client with ContextTimeoutEnabled is
	// trusted to bound its calls by their deadlines (it looks commands up first)
	trustReadOnly bool
	// permits-after-err: a semaphore's refusal of another permits count is
	// read only from a command without an error, so a failed WAIT after it in
	// the same pipeline turns it into ErrUnavailable
	permitsAfterErr bool
	// check-replica: on a ReadOnly Cluster client the wait room's check after
	// a subscription reads a replica, which may not have the latest grant
	checkReplica bool
	// scripts a backend sends: the real ones, or edited by a script mutant
	// (mutantEdits; never nil after parseMutants)
	scripts *scripts
}

// envMutants is LOCKGATE_MUTANTS in a lockgate_mutants build (mutants_env.go).
var envMutants string

// mutantEdits are the script mutants: each replaces text of queue.lua,
// acquire.lua, release.lua or semaphore_acquire.lua (the first that has it).
var mutantEdits = map[string][2]string{
	"queue-expiry": {`  if redis.call('PEXPIRETIME', KEYS[4]) < exp then
    redis.call('PEXPIREAT', KEYS[4], exp + life)
    redis.call('PEXPIREAT', KEYS[5], exp + life)`, `  do
    local d = 2 * tonumber(ARGV[4]) + tonumber(ARGV[2])
    redis.call('PEXPIRE', KEYS[4], d)
    redis.call('PEXPIRE', KEYS[5], d)`},
	"sweep-64": {"local batches, size = math.huge, 100", "local batches, size = 4, 16"},
	// grant-at-expiry: a grant sets the lock's expiry to the entry's end as
	// a time, which Redis 7.0 applies by deleting the key when that time has
	// passed during the call, so the call's later HSET leaves a lock hash
	// without expiry
	"grant-at-expiry": {"redis.call('PEXPIRE', KEYS[1], exp - ms)", "redis.call('PEXPIREAT', KEYS[1], exp)"},
	// a waiter's join leaves a lean hold's field (the holder's HDEL then
	// releases nothing of the full form, and no waiter is handed the lock)
	"lean-stays": {"  redis.call('HDEL', KEYS[1], o)\nend", "end"},
	// a lock hash of one field is read as a lean hold whatever the field's
	// name, so a leftover such as a lone w never expires and is never freed
	"lean-any-field": {"if #h == 2 and #h[1] > 5 then", "if h[1] then"},
	// a head waiter that takes the lock itself with others queued behind it
	// stores no holder tag (acquire.lua)
	"queued-take-untagged": {"if tag then redis.call('HSET', KEYS[1], 't', ARGV[6]) end", "if tag and not queued then redis.call('HSET', KEYS[1], 't', ARGV[6]) end"},
	// a waiter leaving a free lock takes any hash left there for another's
	// hold and hands nothing on (release.lua)
	"leftover-blocks-handon": {"(v[3] or not leanHolder())", "(v[3] or redis.call('EXISTS', KEYS[1]) == 0)"},
	// a Redlock's proposed fence is issued but its slot's fence floor keeps
	// the server's clock (acquire.lua), so a node of its majority may issue
	// a lower fence to the next holder
	"proposal-unrecorded": {"local f = fence(now, ARGV[3], least)", "local f = math.max(fence(now, ARGV[3]), least or 0)"},
	// a Redlock's proposed fence is issued however far ahead of the server's
	// clock (acquire.lua): once the fence floors expire, a later holder whose
	// clock is right gets a lower fence
	"proposal-unclamped": {"math.min(tonumber(ARGV[7]), now[1] * 1000000 + now[2] + 100000)", "tonumber(ARGV[7])"},
	"sem-stop-at-self":   {"      own = true\n", "      own = true\n      free = 0 break\n"},
}

// mutantFlags are the mutants that set a flag, by name.
var mutantFlags = map[string]func(*mutants){
	"late-grant":         func(m *mutants) { m.lateGrant = true },
	"drop-early":         func(m *mutants) { m.dropEarly = true },
	"forget-left":        func(m *mutants) { m.forgetLeft = true },
	"merge-subs":         func(m *mutants) { m.mergeSubs = true },
	"stay-subscribed":    func(m *mutants) { m.staySubscribed = true },
	"check-owner":        func(m *mutants) { m.checkOwner = true },
	"restart-refresh":    func(m *mutants) { m.restartRefresh = true },
	"no-nudge":           func(m *mutants) { m.noNudge = true },
	"late-join-blind":    func(m *mutants) { m.lateJoinBlind = true },
	"no-turns":           func(m *mutants) { m.noTurns = true },
	"no-monitor":         func(m *mutants) { m.noMonitor = true },
	"refusal-definitive": func(m *mutants) { m.refusalDefinitive = true },
	"no-slot-reload":     func(m *mutants) { m.noSlotReload = true },
	"keep-entry":         func(m *mutants) { m.keepEntry = true },
	"keep-straggler":     func(m *mutants) { m.keepStraggler = true },
	"retry-stray":        func(m *mutants) { m.retryStray = true },
	"skip-raise":         func(m *mutants) { m.skipRaise = true },
	"blind-release":      func(m *mutants) { m.blindRelease = true },
	"unbounded-retake":   func(m *mutants) { m.unboundedRetake = true },
	"dial-never-ran":     func(m *mutants) { m.dialNeverRan = true },
	"load-slots":         func(m *mutants) { m.loadSlots = true },
	"check-inline":       func(m *mutants) { m.checkInline = true },
	"forget-free":        func(m *mutants) { m.forgetFree = true },
	"stay-on-master":     func(m *mutants) { m.stayOnMaster = true },
	"wake-on-idle":       func(m *mutants) { m.wakeOnIdle = true },
	"keep-late-renewal":  func(m *mutants) { m.keepLateRenewal = true },
	"first-ctx-only":     func(m *mutants) { m.firstCtxOnly = true },
	"retry-at-expiry":    func(m *mutants) { m.retryAtExpiry = true },
	"no-redlock-backoff": func(m *mutants) { m.noRedlockBackoff = true },
	"timer-only":         func(m *mutants) { m.timerOnly = true },
	"one-pipe":           func(m *mutants) { m.onePipe = true },
	"close-forgets":      func(m *mutants) { m.closeForgets = true },
	"cmd-info":           func(m *mutants) { m.cmdInfo = true },
	"check-any-node":     func(m *mutants) { m.checkAnyNode = true },
	"no-redirect":        func(m *mutants) { m.noRedirect = true },
	"trust-readonly":     func(m *mutants) { m.trustReadOnly = true },
	"permits-after-err":  func(m *mutants) { m.permitsAfterErr = true },
	"check-replica":      func(m *mutants) { m.checkReplica = true },
}

// parseMutants reads a comma-separated list of mutant names.
func parseMutants(list string) (mutants, error) {
	m := mutants{scripts: &queueScripts}
	q, acq, rel, sem := queueSrc, acquireSrc, releaseSrc, semAcquireSrc
	srcs := []*string{&q, &acq, &rel, &sem}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if set, ok := mutantFlags[name]; ok {
			set(&m)
			continue
		}
		if name == "" {
			continue
		}
		e, ok := mutantEdits[name]
		i := slices.IndexFunc(srcs, func(src *string) bool { return strings.Contains(*src, e[0]) })
		if !ok || i < 0 {
			return mutants{}, fmt.Errorf("lockgate: unknown mutant %q", name)
		}
		*srcs[i] = strings.Replace(*srcs[i], e[0], e[1], 1)
	}
	if q != queueSrc || acq != acquireSrc || rel != releaseSrc || sem != semAcquireSrc {
		m.scripts = &scripts{newScript(withQueue(acq, q)), newScript(withQueue(rel, q)), newScript(withQueue(sem, q))}
	}
	return m, nil
}
