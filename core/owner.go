package core

import (
	"context"
	"crypto/rand"
	"strconv"
	"sync/atomic"
)

// ownerKey is the context key under which a lease's context carries the
// lease (*Lease), and NewOwner a nil *Lease that hides the leases above it.
type ownerKey struct{}

// Owner ids are a 128-bit random prefix drawn once per process, followed by
// a counter: unique, unguessable (the prefix never leaves the process and
// Redis), and cheap — no system call per Lock. Every acquisition in Redis
// gets a fresh one; owners are never taken from request data.
var (
	ownerPrefix = rand.Text() + ":"
	ownerSeq    atomic.Uint64
)

// newOwnerID returns a fresh owner id, built on the stack: one allocation.
func newOwnerID() string {
	var b [64]byte // the prefix is 27 bytes, the counter at most 13
	return string(strconv.AppendUint(append(b[:0], ownerPrefix...), ownerSeq.Add(1), 36))
}

// leaseFrom returns the innermost lease carried by ctx, or nil.
func leaseFrom(ctx context.Context) *Lease {
	s, _ := ctx.Value(ownerKey{}).(*Lease)
	return s
}

// reentry returns the innermost lease in ctx's chain that holds key, or
// nil: only a lock that a lease of the chain holds is re-entered, any other
// key is a fresh acquisition (goroutines that share a lease's context share
// that lease, and only for its own key).
func reentry(ctx context.Context, key string) *Lease {
	for s := leaseFrom(ctx); s != nil; s = s.parent {
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
// re-entered: a Lock of a key held higher up the chain waits for it like any
// other owner. Use it for work that must wait for, not join, the enclosing
// critical section. FromContext of the result is nil.
func NewOwner(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownerKey{}, (*Lease)(nil))
}

// FromContext returns the innermost lease whose Context is ctx or an
// ancestor of ctx, or nil (also under NewOwner). Middleware use it to hand
// the lease to handlers.
func FromContext(ctx context.Context) *Lease { return leaseFrom(ctx) }
