// Package connectlock (import path
// github.com/lockgate/lockgate/interceptor/connect) runs Connect handlers
// (connectrpc.com/connect) under a distributed lock from package core. It
// reads the same (lockgate.v1.lock) annotations and takes the same Go
// rules as grpclock (interceptor/grpc), with the same meaning: a service
// served by both answers alike. It is a Go module of its own, so that a
// Connect user does not download grpc-go, and a gRPC user not Connect.
//
// # Use
//
//	lk, err := connectlock.New(locker)
//	if err != nil { ... } // a bad rule: fix the proto or the Go rule
//	mux := http.NewServeMux()
//	mux.Handle(shopv1connect.NewOrdersHandler(svc,
//		connect.WithInterceptors(auth, lk), // the first is the outermost
//	))
//
// Put the lock interceptor after authentication (so {ctx.user} is known and
// rejected calls take no lock) and before the handler's own work. Given to
// a client (connect.WithInterceptors among a client's options), the
// interceptor does nothing: it locks handlers only.
//
// # Which procedures are locked
//
// A procedure is locked when its .proto carries the (lockgate.v1.lock)
// option (proto/lockgate/v1/lock.proto):
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
//	connectlock.WithRule(shopv1connect.OrdersOrderProcedure, connectlock.Rule{Key: "order:{user_id}:{voucher_id}"})
//	connectlock.WithRule(shopv1connect.ExportsExportProcedure, connectlock.Rule{Key: "export:{tenant}", Limit: 3})
//	connectlock.WithRule(shopv1connect.VouchersGetVoucherProcedure, connectlock.Rule{Key: "voucher:{voucher_id}", Shared: true})
//
// With a limit (limit: 3, Rule.Limit 3) up to that many calls of one key
// run at once, each holding one permit of the semaphore named by the key
// (core.Locker.Semaphore) instead of its lock; a call over the limit waits
// and is answered as for a busy lock (connect.CodeResourceExhausted with a
// RetryInfo and Retry-After). A negative limit is an error of New.
//
// With shared (shared: true, Rule.Shared) a method takes its key's lock
// shared (core.Locker.RLock, a read lock): its calls of one key run
// together, a method locking the key without it excludes them and is not
// overtaken by later shared calls; a shared call that cannot enter is
// answered as for a busy lock (connect.CodeResourceExhausted). Shared with a limit is an
// error of New.
//
// When both exist for one procedure the Go rule wins, whole. New reads the
// annotations once, from the descriptors registered in
// protoregistry.GlobalFiles (or WithFiles), and checks every rule then,
// fail-open or not: a malformed key template, a field the request message
// does not have, a field that is not a scalar, a typed placeholder that
// can never parse from its field, a bad wait or ttl, an invalid core
// option, a client-streaming or bidi procedure whose key names a message
// field, and a Go rule for a procedure that no registered service has are
// errors of New, each naming the procedure and the field. Procedures
// without a rule pass through at the cost of one map lookup.
//
// A call's procedure is looked up by connect.Spec.Procedure among those
// New read. A procedure the registry does not have is read, at its first
// call, from its handler's schema (connect.Spec.Schema, the
// protoreflect.MethodDescriptor that connect.WithSchema sets and generated
// code passes): such a procedure is locked by its annotation too. Its
// annotation cannot be checked by New; one that does not compile fails
// every call of the procedure with connect.CodeInternal (logged once at
// error), and never runs the handler without its lock.
//
// # Wait, TTL and keys
//
// As in grpclock: wait and ttl in an annotation are Go duration strings
// (empty keeps the Locker's default, a wait of "0s" makes a single
// attempt); Rule.Wait 0 keeps the default and core.NoWait makes a single
// attempt; a TTL must be at least core.MinTTL. Keys use the template
// language and injective encoding of package keyfunc (keyfunc.GRPC()):
// {name} and {field.a.b} are fields of the request message by proto name,
// {md.x-user-id} is the first value of a request header (a binary header,
// whose name ends in "-bin", is decoded from base64 as gRPC metadata is),
// {ctx.name} a value put in the context with keyfunc.WithValue by an
// earlier interceptor. An unset field counts as missing (for proto3
// scalars without presence, the zero value too). Typed placeholders
// ({user_id:int}, {md.x-tenant:uuid}) lock on the value the handler will
// parse: "01", "+1" and "1" typed :int lock the same key.
//
// # Outcomes
//
//	outcome                                            code
//	-------------------------------------------------  ----------------------------------------
//	lock obtained                                      the handler's own; it runs under the lease
//	a key value missing, too long, with control        CodeInvalidArgument naming the placeholder
//	  characters, or not parsing as its type             ("field.item.sku"); nothing is locked
//	still busy when the wait ends                      CodeResourceExhausted naming the procedure,
//	                                                     with an errdetails.RetryInfo detail
//	                                                     (core.RetryAfter's estimate)
//	the call's context ended first                     CodeCanceled or CodeDeadlineExceeded
//	Redis unreachable, failing or hung                 CodeUnavailable, handler not run; a fail-open
//	  (core.ErrUnavailable)                              rule runs it without a lock (logged)
//	                                                     (every CodeUnavailable: Retry-After: 1 and a
//	                                                     RetryInfo detail of one second, as the HTTP
//	                                                     adapters' 503)
//	the Locker closed or shutting down                 CodeUnavailable "shutting down", fail-open or not
//	a Redis server older than 7.0                      CodeUnavailable (logged at error), fail-open or not
//	anything else, or a bad rule read from a schema    CodeInternal with a generic message (logged)
//
// No Redis address, key value or Redis error text reaches the client;
// they go to the logger (WithLogger). When the lock is obtained the
// handler runs with a context derived from the lease's: FromContext
// returns the lease (use its Fence with every write the lock protects),
// a nested core.Lock of the same key with that context re-enters, and the
// context is cancelled with cause core.ErrLockLost if the lock is lost
// (or core.ErrClosed if the Locker shuts down). The lock is released
// after the handler returns or panics; core detaches the release from the
// call's cancellation, so a call the client cancelled still releases its
// lock, within the release timeout (WithReleaseTimeout).
//
// # Streams
//
// A server-streaming procedure whose key reads the request receives it in
// the interceptor, before the handler, and hands it to the handler's first
// Receive. Client-streaming and bidi procedures lock on headers and context
// values only. The lease lives as long as the stream: it is released when
// the handler returns, and the handler's context is the lease's.
package connectlock
