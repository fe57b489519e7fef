// Package keyfunc turns requests into lock keys. It knows no web framework:
// an adapter (the Fiber and net/http middleware, the gRPC interceptor)
// compiles a Template once and, for each request, calls Key with a Lookup
// that reads the request.
//
// # Templates
//
// A template is literal text with placeholders, e.g.
//
//	order:{query.user_id}:{path.voucher}
//
// A placeholder names its source with a prefix: {path.x} (route parameter),
// {query.x}, {header.X-User-ID}, {form.x}, {body.user.id} (a field of a JSON
// body, dotted path), {ctx.user} (a value earlier middleware stored with
// WithValue), and for gRPC {field.order.id} (request message field) and
// {md.x-user-id} (incoming metadata). A bare {name} is looked up in the
// adapter's bare order: for HTTP path, query, form, body, header
// (HTTPBareOrder); for gRPC the message field (GRPCBareOrder). An adapter
// restricts the sources it supports with Sources/BareOrder (HTTP, GRPC).
//
// Malformed templates (unbalanced braces, empty names, unknown sources,
// adjacent placeholders) fail at Compile with a *Error whose reason is
// ErrBadTemplate, never at request time. Builders give the same compiled
// Template from code: Join(Const("order"), Query("user_id"), Path("voucher")).
//
// # Values and errors
//
// Key returns a *Error naming the placeholder ("query.user_id") with reason
// ErrMissing (absent or empty: never lock on "order::"), ErrTooLong (over
// MaxValueLen, default 256 bytes, or a key over MaxKeyLen), or
// ErrInvalidValue (control characters, invalid UTF-8, a body that is not
// JSON). Use errors.As(err, &e) with e *keyfunc.Error, and errors.Is with the
// sentinels. HTTP adapters answer 400 with the error text, which never holds
// the value.
//
// Values are encoded injectively: '%', ':' and the first byte of each
// literal that follows a placeholder are percent-encoded, so with
// "order:{a}:{b}" the values ("a:b", "c") give "order:a%3Ab:c" and ("a",
// "b:c") give "order:a:b%3Ac"; plain values such as 42 stay readable.
// Together with the rule that placeholders are separated by literal text,
// two different sets
// of values never build the same key (checked by the FuzzKey target).
//
// # Bodies
//
// ReadBody reads a body once, bounded (ErrBodyTooLarge over the bound; HTTP
// adapters answer 413), and JSONBody looks up nested fields, numbers
// rendered as written in the JSON text.
package keyfunc
