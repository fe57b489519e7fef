package core

import "context"

// ForceReleaseOwner is ForceRelease's second step alone, for the hold of
// s as an earlier Inspect saw it: the tests put the hold's end and a new
// owner between the two steps.
func ForceReleaseOwner(ctx context.Context, l *Locker, key string, s *Lease) error {
	k := l.keysFor(key)
	held, err := l.be.forceRelease(ctx, &k, s.h.owner)
	if err == nil && !held {
		return ErrNotHeld
	}
	return err
}
