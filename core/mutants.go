package core

import (
	"fmt"
	"strings"
)

// mutants are defects that were fixed, put back on purpose: the controls
// of the tests and of the fault rig turn one on to show that the check that
// guards against it fails without the fix. They are off unless a test asks
// (through export_test.go) or a binary built with the lockgate_mutants tag
// names them in LOCKGATE_MUTANTS (the fault rig's controls). Each costs a
// branch on a rare path; none is reachable from the public API.
type mutants struct {
	// lateGrant: a grant that arrives too late to use is undone and the
	// wait goes on under the same owner, whose done marker the undo writes
	// (the next attempt then answers "already ended": ErrUnavailable).
	lateGrant bool
	// dropEarly: a grant published before its waiter joined the Locker's
	// room is dropped, and nothing reads Redis again (the bounded buffer of
	// early grants, overflowing).
	dropEarly bool
	// forgetLeft: the room forgets a lock as soon as its last waiter
	// leaves, with the grants that come until the shard unsubscribes; a
	// waiter that joins meanwhile, its grant among them, is not checked
	// for (the subscription goes on: nothing is confirmed again).
	forgetLeft bool
	// mergeSubs: the channels of one node are subscribed in one SSUBSCRIBE,
	// which a Cluster refuses when they are in different slots (CROSSSLOT),
	// and the refusal is swallowed, as go-redis's own Pub/Sub channel does.
	mergeSubs bool
	// staySubscribed: a channel the server unsubscribed (its slot moved)
	// is taken as still subscribed, as go-redis's own Pub/Sub does.
	staySubscribed bool
	// restartRefresh: every grant to another waiter puts a waiter's next
	// refresh a whole interval later (from the grant), so that it never
	// refreshes while handovers come quicker than that.
	restartRefresh bool
	// noNudge: a grant to another waiter wakes no waiter of the lock, though
	// the new holder's first expiry comes before their next wake: a granted
	// waiter that is gone holds the others up until their next refresh.
	noNudge bool
	// lateJoinBlind: a waiter that joins the room after a grant to another
	// waiter (its attempt's reply or its subscription came late) is not
	// told of it, nor of the holder the check after its subscription
	// finds: it sleeps by what its attempt saw.
	lateJoinBlind bool
	// noTurns: every Redlock waiter of a lock tries at each release (no
	// turns), as before turns.go.
	noTurns bool
	// checkOwner: the check after a (re)subscription wakes only a waiter
	// that holds the lock, not the waiters of a lock no one holds.
	checkOwner bool
	// noMonitor: no connection watches the nodes leases are held on, so a
	// lock lost with a restarted node is seen at the next renewal only.
	noMonitor bool
	// refusalDefinitive: a failed dial ends a waiting Lock at once on a
	// Sentinel failover client and a Cluster client too, as on a plain
	// client, though a failover is under way (see failingOver).
	refusalDefinitive bool
	// noSlotReload: a failed dial on a Cluster client does not make it
	// read its slot map again, so it goes on dialling a dead master's
	// address after its replica was promoted (see reloadSlots).
	noSlotReload bool
	// keepEntry: a queued waiter that ends on a failure that never reached
	// Redis (a refused dial, a refused password) leaves its queue entry
	// live, so a release grants the lock to it though it is gone.
	keepEntry bool
	// keepStraggler: a Redlock TryLock that a majority answered busy
	// leaves what a slower node grants it afterwards until its TTL ends.
	keepStraggler bool
	// retryStray: a Redlock attempt busy on a majority and granted by a
	// node is taken for a split: the waiter gives the grant back and tries
	// again within milliseconds, over and over while the holder holds.
	retryStray bool
	// loadSlots: a waiter joining the wait room on a Cluster client that
	// has no slot map yet loads it on the caller's goroutine, past the
	// caller's budget.
	loadSlots bool
	// checkInline: a Redlock Locker's first lock checks the first node's
	// server on the caller's goroutine, within the caller's budget, which
	// a down first node spends.
	checkInline bool
	// forgetFree: the room does not note when a lock was last said free,
	// so a Redlock waiter that joins just after that message (its attempt
	// answered busy before the release) waits for its fallback timer, the
	// holder's TTL.
	forgetFree bool
	// stayOnMaster: a Sentinel failover client's shard stays subscribed on
	// the server it connected to after a failover made that server a
	// replica (go-redis moves its command connections, not Pub/Sub ones),
	// so grants reach it only once that replica syncs, if it ever does.
	stayOnMaster bool
	// wakeOnIdle: releasing the Locker's last hold always wakes the
	// watchdog's scheduler, so one caller's every lock and unlock costs a
	// goroutine wake-up.
	wakeOnIdle bool
	// keepLateRenewal: a renewal (the watchdog's or Extend's) answered
	// after the hold was declared lost still counts: Extend returns nil,
	// and the lock stays extended in Redis though nobody holds it here;
	// one not answered at all is not given back when the hold is lost.
	keepLateRenewal bool
	// firstCtxOnly: only the first Lock's ctx ending stops renewals, so a
	// re-entry never unlocked keeps its lock renewed after the outer
	// Unlock; and a re-entry's Context is not cancelled with the hold.
	firstCtxOnly bool
	// retryAtExpiry: a queued waiter whose attempts fail retries every
	// millisecond once the holder's TTL as last seen has run out, whatever
	// its backoff says.
	retryAtExpiry bool
	// noRedlockBackoff: a Redlock waiter that too few nodes answered tries
	// again after 1–11ms every time, however often it failed.
	noRedlockBackoff bool
	// scripts: the queue's expiry set from the last joiner alone, to
	// twice its entry's life plus its TTL ("queue-expiry"); at most 64 dead
	// entries dropped per call ("sweep-64"); a semaphore waiter whose turn
	// comes takes its permit and leaves the other free ones to the waiters
	// behind it until they next wake ("sem-stop-at-self").
	scripts *scripts
}

// envMutants is LOCKGATE_MUTANTS in a binary built with the
// lockgate_mutants tag (mutants_env.go), else empty.
var envMutants string

// mutantEdits are the script mutants: each replaces text of queue.lua.
var mutantEdits = map[string][2]string{
	"queue-expiry": {`  if redis.call('PEXPIRETIME', KEYS[4]) < exp then
    redis.call('PEXPIREAT', KEYS[4], exp + life)
    redis.call('PEXPIREAT', KEYS[5], exp + life)`, `  do
    local d = 2 * tonumber(ARGV[4]) + tonumber(ARGV[2])
    redis.call('PEXPIRE', KEYS[4], d)
    redis.call('PEXPIRE', KEYS[5], d)`},
	"sweep-64": {"local batches, size = math.huge, 100", "local batches, size = 4, 16"},
}

// semMutantEdits are the semaphore script's mutants: each replaces text of
// semaphore_acquire.lua.
var semMutantEdits = map[string][2]string{
	"sem-stop-at-self": {"      own = true\n", "      own = true\n      free = 0 break\n"},
}

// scriptSet is the scripts a backend of a Locker with m sends.
func (m *mutants) scriptSet() *scripts {
	if m.scripts != nil {
		return m.scripts
	}
	return &queueScripts
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
	"load-slots":         func(m *mutants) { m.loadSlots = true },
	"check-inline":       func(m *mutants) { m.checkInline = true },
	"forget-free":        func(m *mutants) { m.forgetFree = true },
	"stay-on-master":     func(m *mutants) { m.stayOnMaster = true },
	"wake-on-idle":       func(m *mutants) { m.wakeOnIdle = true },
	"keep-late-renewal":  func(m *mutants) { m.keepLateRenewal = true },
	"first-ctx-only":     func(m *mutants) { m.firstCtxOnly = true },
	"retry-at-expiry":    func(m *mutants) { m.retryAtExpiry = true },
	"no-redlock-backoff": func(m *mutants) { m.noRedlockBackoff = true },
}

// parseMutants reads a comma-separated list of mutant names.
func parseMutants(list string) (mutants, error) {
	var m mutants
	q, sem := queueSrc, semAcquireSrc
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if set, ok := mutantFlags[name]; ok {
			set(&m)
			continue
		}
		if name == "" {
			continue
		}
		src := &q
		e, ok := mutantEdits[name]
		if !ok {
			src = &sem
			e, ok = semMutantEdits[name]
		}
		if !ok || !strings.Contains(*src, e[0]) {
			return mutants{}, fmt.Errorf("lockgate: unknown mutant %q", name)
		}
		*src = strings.Replace(*src, e[0], e[1], 1)
	}
	if q != queueSrc || sem != semAcquireSrc {
		m.scripts = &scripts{newScript(withQueue(acquireSrc, q)), newScript(withQueue(releaseSrc, q)), newScript(withQueue(sem, q))}
	}
	return m, nil
}
