// Package grpclock (import path github.com/lockgate/lockgate/interceptor/grpc)
// runs gRPC server methods under a distributed lock from package core. Its
// name is not grpc so that user code needs no import alias.
//
// # Which methods are locked
//
// A method is locked when its .proto carries the (lockgate.v1.lock) option
// (proto/lockgate/v1/lock.proto):
//
//	rpc Order(OrderRequest) returns (OrderReply) {
//	  option (lockgate.v1.lock) = { key: "order:{user_id}:{voucher_id}" wait: "2s" ttl: "30s" };
//	}
//
// or when a Go-side rule names it, for services whose protos cannot be
// changed:
//
//	grpclock.WithRule("/shop.v1.Orders/Order", grpclock.Rule{Key: "order:{user_id}:{voucher_id}"})
//
// When both exist for one method the Go rule wins, whole: the annotation of
// that method is ignored. New reads the annotations once, from the
// descriptors registered in protoregistry.GlobalFiles (or WithFiles), and
// checks every rule then: a malformed key template, a field the request
// message does not have, a field that is not a scalar, a bad wait or ttl,
// a client-streaming or bidi method whose key names a message field, and a
// Go rule for a method that no registered service has are errors of New,
// each naming the method. Methods with neither pass through untouched at
// the cost of one map lookup.
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
// # Outcomes
//
//   - lock obtained: the handler runs with a context derived from the
//     lease's (LeaseFromContext returns the lease; nested core.Lock calls
//     with it re-enter), cancelled with cause core.ErrLockLost if the lock
//     is lost; the lock is released after the handler returns (or panics),
//     with context.WithoutCancel so a cancelled call still releases.
//   - still busy when the wait ends: codes.ResourceExhausted naming the full
//     method, with an errdetails.RetryInfo whose delay is the holder's
//     remaining TTL.
//   - the caller's context ended while waiting: codes.Canceled or
//     codes.DeadlineExceeded.
//   - Redis unreachable: codes.Unavailable and the handler does not run,
//     unless the rule is fail-open (then the handler runs without a lock and
//     a warning is logged).
//   - a key value missing, too long or with control characters:
//     codes.InvalidArgument naming the placeholder (for example
//     "field.item.sku"); nothing is locked.
//   - anything else: codes.Internal with a generic message; details go to
//     the logger only.
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
