package keyfunc

import "strings"

// Const is literal text in a key built with Join. It may not contain '%',
// braces or control characters (ErrBadTemplate from Join).
func Const(text string) Part { return Part{Source: SourceLiteral, Name: text} }

// Path is a path parameter ({path.name}).
func Path(name string) Part { return Part{Source: SourcePath, Name: name} }

// Query is a URL query parameter ({query.name}).
func Query(name string) Part { return Part{Source: SourceQuery, Name: name} }

// Header is a request header ({header.name}).
func Header(name string) Part { return Part{Source: SourceHeader, Name: name} }

// Form is a form field of the body ({form.name}).
func Form(name string) Part { return Part{Source: SourceForm, Name: name} }

// Body is a field of the JSON body, a dotted path ({body.user.id}).
func Body(path string) Part { return Part{Source: SourceBody, Name: path} }

// Ctx is a value put in the request context by earlier middleware
// ({ctx.name}; see WithValue).
func Ctx(name string) Part { return Part{Source: SourceCtx, Name: name} }

// Field is a field of a gRPC request message, a dotted path
// ({field.order.id}).
func Field(path string) Part { return Part{Source: SourceField, Name: path} }

// MD is a gRPC incoming metadata key ({md.name}).
func MD(name string) Part { return Part{Source: SourceMD, Name: name} }

// Any is a bare {name}, looked up in the bare order of the adapter (see
// BareOrder).
func Any(name string) Part { return Part{Source: SourceAuto, Name: name} }

// Int returns the placeholder p typed as TypeInt, the builder form of
// {query.user_id:int}: Query("user_id").Int(). Its value is parsed as a
// decimal int64 and written canonically, so "007" and "7" give one key.
// On literal text (Const) it is an ErrBadTemplate error from Join.
func (p Part) Int() Part { p.Type = TypeInt; return p }

// Uint returns the placeholder p typed as TypeUint ({path.id:uint}):
// Path("id").Uint().
func (p Part) Uint() Part { p.Type = TypeUint; return p }

// UUID returns the placeholder p typed as TypeUUID ({header.X-Tenant:uuid}):
// Header("X-Tenant").UUID().
func (p Part) UUID() Part { p.Type = TypeUUID; return p }

// DefaultSeparator is the text Join puts between parts.
const DefaultSeparator = ":"

// Join builds the template of parts separated by DefaultSeparator ":":
// Join(Const("order"), Query("user_id"), Path("voucher")) is the compiled
// form of "order:{query.user_id}:{path.voucher}", and
// Join(Const("order"), Query("user_id").Int()) that of
// "order:{query.user_id:int}". Errors as for Compile (a *Error with
// ErrBadTemplate); no parts is an error too, and so is a type on literal
// text.
func Join(parts ...Part) (*Template, error) {
	return JoinWith(DefaultSeparator, parts)
}

// MustJoin is Join that panics on error.
func MustJoin(parts ...Part) *Template {
	t, err := Join(parts...)
	if err != nil {
		panic(err)
	}
	return t
}

// JoinWith is Join with another separator (which must be non-empty when
// two placeholders meet) and options (see Compile).
func JoinWith(sep string, parts []Part, opts ...Option) (*Template, error) {
	var merged []Part
	var text strings.Builder
	for i, p := range parts {
		if i > 0 && sep != "" {
			merged = appendPart(merged, Const(sep))
			text.WriteString(sep)
		}
		merged = appendPart(merged, p)
		text.WriteString(p.placeholder())
	}
	return build(text.String(), merged, opts)
}

// appendPart appends p, merging adjacent literal text.
func appendPart(parts []Part, p Part) []Part {
	if n := len(parts); n > 0 && p.Source == SourceLiteral && parts[n-1].Source == SourceLiteral && p.Name != "" && p.Type == TypeNone && parts[n-1].Type == TypeNone {
		parts[n-1].Name += p.Name
		return parts
	}
	return append(parts, p)
}
