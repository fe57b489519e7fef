package core

import (
	"context"
	"crypto/rand"
	"strconv"
	"sync/atomic"
)

// ownerKey is the context key of a lease's *Lease (NewOwner: a nil one).
type ownerKey struct{}

// Owner ids: a 128-bit random prefix drawn once per process, then a counter:
// unique, unguessable, no system call per Lock; never from request data.
var (
	ownerPrefix = rand.Text() + ":"
	ownerSeq    atomic.Uint64
)

// appendOwnerID appends a fresh owner id to b.
func appendOwnerID(b []byte) []byte {
	return strconv.AppendUint(append(b, ownerPrefix...), ownerSeq.Add(1), 36)
}

// reentry returns the innermost lease of ctx's chain that holds key, or nil
// (any other key is a fresh acquisition). See docs/usage.md, "Lock in detail".
func reentry(ctx context.Context, key string) *Lease {
	for s := FromContext(ctx); s != nil; s = s.parent {
		for _, p := range s.parts {
			if p.h.key == key {
				return p
			}
		}
		if s.h != nil && s.h.key == key && !s.h.keys.semaphore() { // a permit is never re-entered
			return s
		}
	}
	return nil
}

// NewOwner returns a copy of ctx under which no lease of ctx's chain is
// re-entered: a Lock of a key held up the chain waits like any other owner.
// FromContext of the result is nil.
func NewOwner(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownerKey{}, (*Lease)(nil))
}

// FromContext returns the innermost lease whose Context is ctx or an ancestor
// of it, or nil (also under NewOwner).
func FromContext(ctx context.Context) *Lease {
	s, _ := ctx.Value(ownerKey{}).(*Lease)
	return s
}
