package rpclock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// Outcome is what a failed acquisition means to the caller; each
// interceptor maps it to its framework's code.
type Outcome int

const (
	// InvalidKey: a key value missing, too long, with control characters
	// or not parsing as its placeholder's type (InvalidArgument).
	InvalidKey Outcome = iota + 1
	// Busy: still held by another call when the wait ended
	// (ResourceExhausted, with a RetryInfo when RetryAfter is set).
	Busy
	// Unavailable: Redis unavailable, the Locker shutting down, or the
	// server unsupported (Unavailable, with a RetryInfo of
	// UnavailableRetryAfter).
	Unavailable
	// Canceled and DeadlineExceeded: the call's context ended first.
	Canceled
	DeadlineExceeded
	// Internal: anything else (Internal, with a generic message).
	Internal
)

var outcomeNames = [...]string{
	InvalidKey:       "invalid key",
	Busy:             "busy",
	Unavailable:      "unavailable",
	Canceled:         "canceled",
	DeadlineExceeded: "deadline exceeded",
	Internal:         "internal",
}

func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Failure is why a call did not get its lock, as the client is told.
type Failure struct {
	Outcome Outcome
	// Message is the text for the client. It names the method; it never
	// carries a key value, a Redis address or Redis's error text (those go
	// to the logger).
	Message string
	// RetryAfter is when the client may try again, set when HasRetryAfter
	// is: for Busy, core's estimate of when the lock is likely free (when
	// core gives one); for Unavailable, always UnavailableRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Err is the error behind the failure: the context's error for
	// Canceled and DeadlineExceeded, the key's or Lock's error otherwise.
	Err error
}

// UnavailableRetryAfter is the pause an Unavailable answer asks of its
// client (a RetryInfo; over Connect also the Retry-After header): one
// second, the Retry-After of every 503 of the HTTP adapters
// (lockhttp.UnavailableRetryAfter). Short, since Redis is often back
// within a failover; the client's own backoff does the rest.
const UnavailableRetryAfter = time.Second

// Gate takes and releases the locks of compiled methods for one
// interceptor. Its fields are set once, before use.
type Gate struct {
	Name   string // prefix of the logs ("grpclock", "connectlock")
	Locker *core.Locker
	Logger *slog.Logger
}

// Acquire builds m's key for one call and takes the lock (shared with
// m.Shared; with m.Limit, one of the permits of the semaphore named by the
// key). It returns the lease; or nil and nil when the rule is fail-open
// and Redis is unavailable (the handler runs without the lock; logged as a
// warning with the rule's pattern, never the key); or a Failure.
func (g *Gate) Acquire(ctx context.Context, m *Method, msg protoreflect.Message, md Metadata) (*core.Lease, *Failure) {
	key, err := m.Key.Build(ctx, msg, md)
	if err != nil {
		return nil, KeyFailure(m, err)
	}
	var lease *core.Lease
	switch {
	case m.Shared:
		lease, err = g.Locker.RLock(ctx, key, m.Opt)
	case m.Limit > 0:
		lease, err = g.Locker.Semaphore(ctx, key, m.Limit, m.Opt)
	default:
		lease, err = g.Locker.Lock(ctx, key, m.Opt)
	}
	if err == nil {
		return lease, nil
	}
	if m.FailOpen && FailOpen(err) {
		g.Logger.WarnContext(ctx, g.Name+": redis unavailable, running without the lock (fail-open)",
			"method", m.Name, "rule", m.Origin, "pattern", m.Pattern, "error", err)
		return nil, nil
	}
	return nil, g.LockFailure(ctx, m, err)
}

// KeyFailure is the InvalidKey failure of a key error. keyfunc errors name
// the placeholder and never carry the value, so their text is safe to send.
func KeyFailure(m *Method, err error) *Failure {
	f := &Failure{Outcome: InvalidKey, Err: err, Message: m.Name + ": invalid lock key"}
	var ke *keyfunc.Error
	if errors.As(err, &ke) {
		f.Message += ": " + ke.Error()
	}
	return f
}

// FailOpen reports whether a Lock error allows a fail-open rule to run the
// handler without the lock: Redis unavailable, and only that. Not a closed
// Locker, an unsupported server, bad input, nor a call whose context ended
// (there is no caller left to serve, even if Redis was also unavailable).
func FailOpen(err error) bool {
	return errors.Is(err, core.ErrUnavailable) && ContextErr(err) == nil
}

// ContextErr returns the context error err carries (context.Canceled or
// context.DeadlineExceeded), or nil.
func ContextErr(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return context.Canceled
	}
	return nil
}

// LockFailure says what a Lock error means. Error text from core and Redis
// goes to the logger, never to the client.
//
//   - ErrUnavailable, also joined with the context's error: Unavailable
//     (Redis did not answer; whether the lock is free is unknown), logged
//     at error;
//   - ErrClosed: Unavailable, "shutting down";
//   - ErrUnsupported: Unavailable, logged at error (a deployment problem);
//   - each Unavailable with RetryAfter UnavailableRetryAfter, as every
//     503 of the HTTP adapters carries Retry-After: 1;
//   - ErrNotObtained joined with the context's error: the context's
//     outcome (Canceled or DeadlineExceeded), since the caller gave up
//     first;
//   - ErrNotObtained: Busy, with core's estimate of when to retry;
//   - a plain context error: Canceled or DeadlineExceeded;
//   - anything else (ErrInvalid, ...): Internal, logged at error.
func (g *Gate) LockFailure(ctx context.Context, m *Method, err error) *Failure {
	switch {
	case errors.Is(err, core.ErrUnavailable):
		g.Logger.ErrorContext(ctx, g.Name+": redis unavailable", "method", m.Name, "error", err)
		return unavailable(err, m.Name+": lock service unavailable, please retry later")
	case errors.Is(err, core.ErrClosed):
		return unavailable(err, m.Name+": lock service shutting down")
	case errors.Is(err, core.ErrUnsupported):
		g.Logger.ErrorContext(ctx, g.Name+": redis server not supported", "method", m.Name, "error", err)
		return unavailable(err, m.Name+": lock service unavailable")
	case ContextErr(err) != nil:
		// ErrNotObtained joined with the context's error, or the
		// context's error alone: the caller's budget ended.
		cerr := ContextErr(err)
		o := Canceled
		if cerr == context.DeadlineExceeded {
			o = DeadlineExceeded
		}
		return &Failure{Outcome: o, Err: cerr, Message: cerr.Error()}
	case errors.Is(err, core.ErrNotObtained):
		f := &Failure{Outcome: Busy, Err: err, Message: m.Name + " is busy: another call holds its lock, please retry later"}
		if m.Limit > 0 {
			f.Message = m.Name + " is busy: " + strconv.Itoa(m.Limit) + " calls of this key are running, please retry later"
		}
		// core.RetryAfter: not the holder's TTL, which only bounds it.
		f.RetryAfter, f.HasRetryAfter = core.RetryAfter(err)
		return f
	}
	g.Logger.ErrorContext(ctx, g.Name+": lock failed", "method", m.Name, "error", err)
	return &Failure{Outcome: Internal, Err: err, Message: m.Name + ": internal error"}
}

// unavailable is the Unavailable failure of err, with message msg and
// the pause UnavailableRetryAfter.
func unavailable(err error, msg string) *Failure {
	return &Failure{Outcome: Unavailable, Err: err, Message: msg, RetryAfter: UnavailableRetryAfter, HasRetryAfter: true}
}

// Release unlocks after the handler. core detaches the release from the
// call's cancellation (a call the client cancelled still releases its lock)
// and bounds it by the release timeout, so ctx is passed as it is. A
// failed release is logged; the lock then expires after its TTL.
func (g *Gate) Release(ctx context.Context, m *Method, lease *core.Lease) {
	err := lease.Unlock(ctx)
	switch {
	case err == nil:
	case errors.Is(err, core.ErrLockLost):
		// The handler's context was cancelled when the lock was lost;
		// there is nothing left to release.
		g.Logger.WarnContext(ctx, g.Name+": the lock was lost while the handler ran",
			"method", m.Name, "pattern", lease.Pattern(), "fence", lease.Fence(), "error", err)
	case errors.Is(err, core.ErrClosed):
		g.Logger.WarnContext(ctx, g.Name+": the Locker was closed while the handler ran (Shutdown released the lock; after Close it expires after its TTL)",
			"method", m.Name, "pattern", lease.Pattern(), "fence", lease.Fence())
	default:
		g.Logger.WarnContext(ctx, g.Name+": release failed (the lock expires after its TTL)",
			"method", m.Name, "pattern", lease.Pattern(), "fence", lease.Fence(), "error", err)
	}
}

// ErrHandOn is HandOn's error when the request cannot be copied.
var ErrHandOn = errors.New("cannot hand on the request")

// HandOn copies first, the request a server-streaming interceptor received
// to build the key, into dst, the message the handler receives into. dst
// must be a proto.Message (ErrNotProto otherwise); when its Go type
// differs from first's (a dynamic message), the copy goes through the wire
// format (ErrHandOn if that fails).
func HandOn(dst any, first proto.Message) error {
	pm, ok := dst.(proto.Message)
	if !ok {
		return ErrNotProto
	}
	if pm.ProtoReflect().Descriptor() == first.ProtoReflect().Descriptor() {
		proto.Reset(pm)
		proto.Merge(pm, first)
		return nil
	}
	b, err := proto.Marshal(first)
	if err != nil {
		return ErrHandOn
	}
	if err := proto.Unmarshal(b, pm); err != nil {
		return ErrHandOn
	}
	return nil
}
