package core

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// What an error from Redis or the client means for a call: whether it may
// pass by itself, ends the call at once, or says the call never ran.

// transient reports whether err may pass by itself (one the client would
// have re-sent after): a connection failure, a full pool, or a server
// loading, read-only or between masters. Never a definitive one.
func transient(err error) bool {
	if definitive(err) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, redis.ErrPoolTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) || hasErrorPrefix(err, transientPrefixes)
}

var transientPrefixes = []string{"LOADING", "READONLY", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "ERR max number of clients reached"}

// definitive reports whether err ends a call at once, since retrying cannot
// help: a failed dial (the client already retried it), refused credentials
// or command, or WRONGTYPE. failingOver makes an exception for dials.
func definitive(err error) bool { return dialFailed(err) || refusedByServer(err) }

// refusedByServer reports an auth, ACL or WRONGTYPE refusal.
func refusedByServer(err error) bool {
	return authFailed(err) || redis.HasErrorPrefix(err, "WRONGTYPE")
}

// failingOver reports whether err is a failed dial on a Sentinel or Cluster
// client that reached its deployment before, which a waiting Lock retries.
// See docs/topologies.md, "A refused dial during a failover".
func (l *Locker) failingOver(err error) bool {
	// Never a probe's refusal: the call it stopped goes to its undo.
	return l.retriesRefusals() && dialFailed(err) && !isProbe(err)
}

// retriesRefusals reports whether a waiting Lock retries a failed dial.
func (l *Locker) retriesRefusals() bool {
	return l.followsFailovers && l.reached.Load() && !l.mut.refusalDefinitive
}

// isFailoverClient reports whether c is a Sentinel failover client.
func isFailoverClient(c redis.UniversalClient) bool {
	p, ok := c.(*redis.Client)
	return ok && p.Options().Addr == "FailoverClient"
}

// dialFailed reports whether err is a failure to connect (nothing sent).
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// authFailed reports a refused password or permission (the call did not run).
func authFailed(err error) bool {
	return hasErrorPrefix(err, authPrefixes) || err != nil && strings.Contains(err.Error(), "Protocol error: unauthenticated")
}

func hasErrorPrefix(err error, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return redis.HasErrorPrefix(err, p) })
}

var authPrefixes = []string{"NOAUTH", "WRONGPASS", "NOPERM"}

// neverRan reports whether a call that failed with err cannot have run; a
// probe's dial says nothing of the call it stopped.
func neverRan(err error) bool {
	var ran *ranOnNodes
	return !isProbe(err) && !errors.As(err, &ran) && (dialFailed(err) || authFailed(err))
}

// withCause names a missing password, which otherwise shows as a protocol error.
func withCause(err error) error {
	if err != nil && strings.Contains(err.Error(), "Protocol error: unauthenticated") {
		return fmt.Errorf("authentication required: the server asks for a password and the client sent none (%w)", err)
	}
	return err
}
