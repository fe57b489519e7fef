// Package grpclock (import path github.com/lockgate/lockgate/interceptor/grpc)
// runs gRPC server methods under a distributed lock from package core. Its
// name is not grpc so that user code needs no import alias. Connect
// services get the same annotations, rules and outcomes from connectlock
// (interceptor/connect, a module of its own).
//
// # Which methods are locked
//
// A method is locked when its .proto carries the (lockgate.v1.lock) option
// (proto/lockgate/v1/lock.proto):
//
//	rpc Order(OrderRequest) returns (OrderReply) {
//	  option (lockgate.v1.lock) = { key: "order:{user_id}:{voucher_id}" wait: "2s" ttl: "30s" };
//	}
//	rpc Export(ExportRequest) returns (ExportReply) {
//	  option (lockgate.v1.lock) = { key: "export:{tenant}" limit: 3 }; // 3 at once per tenant
//	}
//	rpc GetVoucher(GetVoucherRequest) returns (Voucher) {
//	  option (lockgate.v1.lock) = { key: "voucher:{voucher_id}" shared: true }; // reads together
//	}
//
// or when a Go-side rule names it, for services whose protos cannot be
// changed:
//
//	grpclock.WithRule("/shop.v1.Orders/Order", grpclock.Rule{Key: "order:{user_id}:{voucher_id}"})
//	grpclock.WithRule("/shop.v1.Exports/Export", grpclock.Rule{Key: "export:{tenant}", Limit: 3})
//	grpclock.WithRule("/shop.v1.Vouchers/GetVoucher", grpclock.Rule{Key: "voucher:{voucher_id}", Shared: true})
//
// With a limit (limit: 3, Rule.Limit 3) up to that many calls of one key
// run at once, each holding one permit of the semaphore named by the key
// (core.Locker.Semaphore) instead of its lock; a call over the limit waits
// and is answered as for a busy lock (codes.ResourceExhausted with a
// RetryInfo). A negative limit is an error of New.
//
// With shared (shared: true, Rule.Shared) a method takes its key's lock
// shared (core.Locker.RLock, a read lock): its calls of one key run
// together, a method locking the key without it excludes them and is not
// overtaken by later shared calls; a shared call that cannot enter is
// answered as for a busy lock (codes.ResourceExhausted). Shared with a limit is an
// error of New.
//
// When both exist for one method the Go rule wins, whole: the annotation of
// that method is ignored. New reads the annotations once, from the
// descriptors registered in protoregistry.GlobalFiles (or WithFiles), and
// checks every rule then, fail-open or not: a malformed key template, a
// field the request message does not have, a field that is not a scalar, a
// typed placeholder that can never parse from its field, a bad wait or ttl,
// an invalid core option (Rule.Options and WithLockOptions go through
// core.Combine), a client-streaming or bidi method whose key names a
// message field, and a Go rule for a method that no registered service has
// are errors of New, each naming the method and the field. A bad rule is
// therefore never a failure of every call, nor a reason to run without the
// lock. Methods with neither pass through untouched at the cost of one map
// lookup.
//
// # Wait and TTL
//
// In an annotation, wait and ttl are Go duration strings: an empty string
// keeps the Locker's default, a wait of "0s" makes a single attempt, a
// negative wait and a ttl below core.MinTTL (50ms) are errors of New. In a
// Go rule, Rule.Wait 0 keeps the Locker's default, core.NoWait makes a
// single attempt and another negative value is an error; Rule.TTL 0 keeps
// the default and a set TTL must be at least core.MinTTL.
//
// # Keys
//
// Keys use the template language and injective encoding of package keyfunc
// (keyfunc.GRPC()): {name} and {field.a.b} are fields of the request message
// by proto name (nested through singular message fields), {md.x-user-id} is
// the first value of an incoming metadata key, {ctx.name} a value put in the
// context with keyfunc.WithValue by an earlier interceptor (such as the
// authenticated user). Field values are rendered as text: strings as they
// are, integers in decimal, booleans as true/false, enums by name. A field
// that is unset counts as missing; for proto3 scalars without presence this
// includes the zero value ("" or 0), so declare the field optional to lock
// on 0.
//
// Typed placeholders ({user_id:int}, {field.order.id:uint},
// {md.x-tenant:uuid}) build the key from the value the handler will parse:
// "01", "+1" and "1" in a string field typed :int lock the same key, and a
// value that does not parse ("x") is codes.InvalidArgument naming the
// field. A string field takes every type and an integer field takes :int
// and :uint; a type that can never parse from its field (:uuid on an
// integer field; any type on a bool, enum or bytes field) is an error of
// New naming the method and the field.
//
// # Outcomes
//
//   - lock obtained: the handler runs with a context derived from the
//     lease's (FromContext returns the lease; nested core.Lock calls of the
//     same key with it re-enter), cancelled with cause core.ErrLockLost if
//     the lock is lost, or core.ErrClosed if the Locker shuts down; the lock
//     is released after the handler returns (or panics). core detaches the
//     release from the call's cancellation, so a call the client cancelled
//     still releases its lock, within the release timeout
//     (WithReleaseTimeout, default the Locker's).
//   - still busy when the wait ends: codes.ResourceExhausted naming the full
//     method, with an errdetails.RetryInfo whose delay is core's estimate of
//     when the lock is likely free (core.RetryAfter).
//   - the caller's context ended first (while waiting or before any
//     answer): codes.Canceled or codes.DeadlineExceeded, not
//     ResourceExhausted.
//   - Redis unreachable, failing or hung (core.ErrUnavailable, within the
//     wait budget plus a small bound; a refused connection at once):
//     codes.Unavailable, with an errdetails.RetryInfo of one second (as
//     the HTTP adapters' 503 carries Retry-After: 1; so do the two
//     Unavailable answers below), logged at error with its cause; the
//     handler does not run, unless the rule is fail-open (then the handler
//     runs without a lock and a warning is logged). Fail-open applies to that
//     case only: never when the call's context ended meanwhile.
//   - the Locker closed or shutting down (core.ErrClosed): codes.Unavailable
//     "shutting down", also for fail-open rules.
//   - a Redis server older than 7.0 (core.ErrUnsupported): codes.Unavailable,
//     logged at error, also for fail-open rules.
//   - a key value missing, too long, with control characters, or not
//     parsing as its placeholder's type: codes.InvalidArgument naming the
//     placeholder (for example "field.item.sku"); nothing is locked.
//   - anything else: codes.Internal with a generic message; details go to
//     the logger only (as for Unavailable: no Redis address or error text
//     reaches the client).
//
// # Streams
//
// A server-streaming method locks on its request message: the interceptor
// receives it before calling the handler and hands it to the handler's
// first RecvMsg. Client-streaming and bidi methods lock on metadata (and
// context values) only. The lease lives as long as the stream: it is
// released when the handler returns, and the stream's Context is the
// lease's.
//
// # Use
//
//	lk, err := grpclock.New(locker)
//	if err != nil { ... }  // a bad rule: fix the proto or the Go rule
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(auth, lk.Unary()),
//		grpc.ChainStreamInterceptor(auth, lk.Stream()),
//	)
//
// Put the lock interceptor after authentication (so {ctx.user} is known and
// rejected calls take no lock) and before the handler's own work.
package grpclock
