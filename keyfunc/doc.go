// Package keyfunc turns requests into lock keys. It knows no web framework:
// an adapter (the net/http, chi, Gin, Echo and Fiber middleware, the gRPC
// and Connect interceptors) takes a key template from its user and builds
// each request's key with it. The sections before "Writing an adapter" are
// for users writing templates; that last one is for adapter authors.
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
// adapter's bare order: for HTTP path, query, form, body, header (see
// HTTP); for gRPC the message field (see GRPC).
//
// Malformed templates (unbalanced braces, empty names, unknown sources or
// types, adjacent placeholders) fail at Compile with a *Error whose reason
// is ErrBadTemplate, never at request time. Builders give the same compiled
// Template from code: Join(Const("order"), Query("user_id"), Path("voucher")).
//
// # Typed placeholders
//
// An untyped placeholder locks on the raw text, but a handler usually
// parses it: strconv.ParseInt reads "1", "01", "001" and "+1" as the same
// user, so with {query.user_id} a client spelling one id several ways gets
// several locks, and several orders. A typed placeholder builds the key from
// the value the handler will parse:
//
//	order:{query.user_id:int}:{path.voucher_id:uint}
//
// The type follows the name after a ':' and works with every source and
// with bare names: {query.user_id:int}, {path.id:uint},
// {header.X-Tenant:uuid}, {field.order.id:int}, {user_id:int}. The types
// (ValueType) are
//
//   - int: a decimal integer that fits int64, accepted exactly as
//     strconv.ParseInt(v, 10, 64) accepts it ("01", "+1" and "-0" too) and
//     written as strconv.FormatInt writes it ("1", "0");
//   - uint: a non-negative decimal integer that fits uint64, with an
//     optional leading '+' and leading zeros, written in canonical decimal
//     ("-0" and "-1" are rejected);
//   - uuid: any form github.com/google/uuid.Parse accepts (hyphenated,
//     "urn:uuid:" prefix, braces, 32 hex digits), written lower-case and
//     hyphenated.
//
// The value is parsed and replaced by its canonical spelling before the
// length and encoding checks of Key (MaxValueLen applies to the canonical
// value): a non-canonical spelling maps to the same key; a value that does
// not parse is a 400 naming the field (a *Error with reason ErrInvalidValue,
// text "query.user_id: invalid value: not an integer"). An absent or empty
// value is ErrMissing as for untyped placeholders, and for a bare typed
// name the first non-empty value of the bare order is the one parsed. An
// unknown or empty type ({query.x:float}, {query.x:}) is an ErrBadTemplate
// error at Compile. Since ':' starts the type, names may not contain ':'
// (nor braces, '%', spaces or control characters), in templates and in
// builders alike. Builders set a type with Query("user_id").Int(),
// Path("id").Uint(), Header("X-Tenant").UUID(); Part.Type holds it, and
// Part.String names the field without it ("query.user_id").
//
// # Values and errors
//
// Key returns a *Error naming the placeholder ("query.user_id") with reason
// ErrMissing (absent or empty: never lock on "order::"), ErrTooLong (over
// MaxValueLen, default 256 bytes, or a key over MaxKeyLen), or
// ErrInvalidValue (control characters, invalid UTF-8, a typed value that
// does not parse, a body that is not JSON). Use errors.As(err, &e) with
// e *keyfunc.Error, and errors.Is with the sentinels. HTTP adapters answer
// 400 with the error text, which never holds the value nor the package
// name: "query.user_id: missing or empty value"; a body over the adapter's
// bound is ErrBodyTooLarge, answered 413. Setup errors (ErrBadTemplate) go to
// developers and start with "keyfunc: ".
//
// Values are encoded injectively: '%', ':' and the first byte of each
// literal that follows a placeholder are percent-encoded, so with
// "order:{a}:{b}" the values ("a:b", "c") give "order:a%3Ab:c" and ("a",
// "b:c") give "order:a:b%3Ac"; plain values such as 42 stay readable.
// Together with the rule that placeholders are separated by literal text,
// two different sets
// of values never build the same key (checked by the FuzzKey target); with
// typed placeholders, two sets build the same key exactly when they parse
// to the same values (FuzzKey, FuzzTyped).
//
// # Writing an adapter
//
// An adapter compiles its user's template once, when the route is set up:
// Compile(text, HTTP()) for a template string, t.For(HTTP()) for a Template
// built with Join (GRPC() in an RPC adapter). The option restricts the
// sources to those the adapter reads and sets the bare order, so a template
// naming another source fails at setup, not per request; Sources and
// BareOrder do the same for another kind of adapter.
//
// For each request the adapter calls Key with a Lookup that reads the
// request: Lookup(src, name) returns the value, whether it is present, and
// an error for a value that cannot be read (a body that is not JSON, one
// over the bound). For nested sources (body, field) SplitPath splits the
// dotted name into its segments. Template.Uses says whether a template reads
// a source, so that the body is read only when a key needs it.
//
// # Bodies
//
// ReadBody reads a body once, bounded (ErrBodyTooLarge over the bound; HTTP
// adapters answer 413), and JSONBody looks up nested fields, numbers
// rendered as written in the JSON text. {ctx.name} values, stored with
// WithValue, are read with ContextValue; FormatValue renders a context or
// message value as key text.
package keyfunc
