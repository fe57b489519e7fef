package core

import (
	"context"
	"os"
	"time"
)

// ForceReleaseOwner is ForceRelease's second step alone, for the hold of
// s as an earlier Inspect saw it: the tests put the hold's end and a new
// owner between the two steps.
func ForceReleaseOwner(ctx context.Context, l *Locker, key string, s *Lease) error {
	k := l.keysFor(key)
	held, err := l.be.forceRelease(ctx, &k, s.h.owner.id)
	if err == nil && !held {
		return ErrNotHeld
	}
	return err
}

// WithMutants puts back the fixed defects named (comma-separated; see
// mutants.go) in the Locker: the controls of the tests that guard against
// them.
func WithMutants(names string) Option {
	return lockerOption(func(o *lockerOptions) { o.mutants = names })
}

// ScriptSource is the source the Locker sends for scripts/<name>.lua (the
// acquire, release and inspect scripts with the queue's functions spliced in).
func ScriptSource(name string) (string, error) {
	switch name {
	case "acquire":
		return withQueue(acquireSrc, queueSrc), nil
	case "release":
		return withQueue(releaseSrc, queueSrc), nil
	case "inspect":
		return inspectScript.src, nil
	}
	b, err := os.ReadFile("scripts/" + name + ".lua")
	return string(b), err
}

// MutantScriptSource is ScriptSource("acquire" or "release") with the
// script mutants named (see mutants.go) put back.
func MutantScriptSource(name, mutantList string) (string, error) {
	m, err := parseMutants(mutantList)
	if err != nil {
		return "", err
	}
	if name == "release" {
		return m.scripts.release.src, nil
	}
	return m.scripts.acquire.src, nil
}

// FenceFloorKey is the key of the fence floor that the lock named name
// shares with every name of its Cluster slot.
func FenceFloorKey(l *Locker, name string) string { k := l.keysFor(name); return k.names[1] }

// SetProposalLead sets how far ahead of this host's clock Redlock Locker
// l proposes its locks' fences, as a Locker on a host whose clock is that
// far ahead would.
func SetProposalLead(l *Locker, d time.Duration) { l.be.(*redlock).lead = d }

// SetIdleStop sets how long a Locker's watchdog goroutines outlive its last
// hold, for the test's duration (restore puts the default back).
func SetIdleStop(d time.Duration) (restore func()) {
	old := idleStop.Swap(int64(d))
	return func() { idleStop.Store(old) }
}

// WatchdogPasses is how many times l's watchdog scheduler has woken.
func WatchdogPasses(l *Locker) int64 { return l.wd.passes.Load() }

// PauseWatchdog stops l's watchdog goroutines (as a loaded process may
// delay them) until resume; holds taken meanwhile start none.
func PauseWatchdog(l *Locker) (resume func()) {
	w := l.wd
	w.mu.Lock()
	if w.start(); w.stopRun != nil {
		w.stopRun()
	}
	w.mu.Unlock()
	w.wg.Wait()
	return func() {
		w.mu.Lock()
		w.started = false
		w.start()
		w.mu.Unlock()
	}
}

// SlotOf is the Cluster hash slot of a lock name without braces or '%'.
func SlotOf(name string) int { return slotOf(name) }

// OnChecked makes l's wait rooms call f each time a check (what Redis says
// of the locks just subscribed to) has ended; set it before l's first call.
func OnChecked(l *Locker, f func()) {
	for _, r := range l.waitRooms {
		r.checked = f
	}
}

// OnDelivered makes l's wait rooms call f each time they have handled a
// grant or free message; set it before l's first call.
func OnDelivered(l *Locker, f func()) {
	for _, r := range l.waitRooms {
		r.delivered = f
	}
}

// OnQueued makes l's coalescers call f for each call they queue behind the
// round trips in flight; set it before l's first call.
func OnQueued(l *Locker, f func()) {
	be := l.be.(*deployment)
	if be.pipe != nil {
		be.pipe.queued = f
	}
	if be.masters != nil {
		be.masters.queued = f
	}
}

// Marked reports whether s's release would leave done markers now (hold.markers).
func Marked(s *Lease) bool { return s.h.markers() != noMarkers }
