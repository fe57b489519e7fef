package core

import (
	"context"
	"crypto/rand"
)

type ownerKey struct{}

// ownerTag is what a context carries: the owner id, and the lease whose
// context it is (nil for a context made by NewOwner).
type ownerTag struct {
	id    string
	lease *Lease
}

// newOwnerID returns a random, unguessable owner id (128 bits).
func newOwnerID() string { return rand.Text() }

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
