package core

import (
	"context"
	"crypto/rand"
	"strconv"
	"sync/atomic"
)

type ownerKey struct{}

// ownerTag is what a context carries: the owner id, and the lease whose
// context it is (nil for a context made by NewOwner).
type ownerTag struct {
	id    string
	lease *Lease
}

// Owner ids are a 128-bit random prefix drawn once per process, followed by
// a counter: unique, unguessable (the prefix never leaves the process and
// Redis), and cheap — no system call per Lock.
var (
	ownerPrefix = rand.Text() + ":"
	ownerSeq    atomic.Uint64
)

// newOwnerID returns a fresh owner id.
func newOwnerID() string {
	return ownerPrefix + strconv.FormatUint(ownerSeq.Add(1), 36)
}

func ownerFrom(ctx context.Context) *ownerTag {
	t, _ := ctx.Value(ownerKey{}).(*ownerTag)
	return t
}

// NewOwner returns a copy of ctx that carries a fresh owner. A Lock called
// with it (or a context derived from it) never re-enters a lock held by a
// lease higher up ctx's chain: use it for work that must wait for, not join,
// the enclosing critical section. Owners are random and never taken from
// request data.
func NewOwner(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownerKey{}, &ownerTag{id: newOwnerID()})
}

// FromContext returns the innermost lease whose Context is ctx or an
// ancestor of ctx, or nil. Middleware use it to hand the lease to handlers.
func FromContext(ctx context.Context) *Lease {
	if t := ownerFrom(ctx); t != nil {
		return t.lease
	}
	return nil
}
