package keyfunc

import (
	"slices"
	"strings"
)

// Limits of templates and keys.
const (
	// DefaultMaxValueLen is the default longest value, in bytes before
	// encoding, accepted for one placeholder (see MaxValueLen).
	DefaultMaxValueLen = 256
	// MaxKeyLen is the longest key Key returns, in bytes; it equals
	// core.MaxKeyLen, the longest lock name the Locker accepts.
	MaxKeyLen = 1024
)

// Lookup is supplied by an adapter: it returns the value of the placeholder
// name in source src for the current request, whether it is present, and an
// error for a value that cannot be read (for example a body that is not
// JSON). src is never SourceAuto or SourceLiteral: Key resolves bare names
// by calling Lookup for each source of the bare order. An error that is not
// already a *Error is wrapped in one naming the placeholder.
type Lookup func(src Source, name string) (value string, ok bool, err error)

// Part is one piece of a template: literal text, or a placeholder.
type Part struct {
	// Source is SourceLiteral for literal text, SourceAuto for a bare
	// {name}, else the placeholder's source.
	Source Source
	// Name is the placeholder name without its source prefix and type
	// ("user_id", "user.id"); for literal text, the text.
	Name string
	// Type is the placeholder's type ({query.user_id:int} is TypeInt); it
	// is TypeNone for an untyped placeholder and for literal text.
	Type ValueType
}

// IsLiteral reports whether p is literal text.
func (p Part) IsLiteral() bool { return p.Source == SourceLiteral }

// String returns the placeholder as written without braces and without
// its type ("query.user_id" for {query.user_id:int}, or "voucher" for a
// bare name), or the literal text. It is the Part named by *Error.
func (p Part) String() string {
	switch p.Source {
	case SourceLiteral, SourceAuto:
		return p.Name
	}
	return p.Source.String() + "." + p.Name
}

// placeholder returns p as written in a template: "{query.user_id:int}",
// "{voucher}"; for literal text, the text.
func (p Part) placeholder() string {
	if p.Source == SourceLiteral {
		return p.Name
	}
	s := "{" + p.String()
	if p.Type != TypeNone {
		s += ":" + p.Type.String()
	}
	return s + "}"
}

// Option configures Compile, Join and For.
type Option func(*config)

type config struct {
	allowed     []Source
	bare        []Source
	maxValueLen int
}

func defaultConfig() config {
	return config{
		allowed:     []Source{SourcePath, SourceQuery, SourceHeader, SourceForm, SourceBody, SourceCtx, SourceField, SourceMD},
		bare:        httpBareOrder,
		maxValueLen: DefaultMaxValueLen,
	}
}

// Sources restricts the sources a template may name; another source is an
// ErrBadTemplate error at construction. Default: all sources.
func Sources(srcs ...Source) Option {
	return func(c *config) { c.allowed = slices.Clone(srcs) }
}

// BareOrder sets the sources tried, in order, for a bare {name}; the first
// present, non-empty value wins. Every source must also be allowed (see
// Sources). An empty order forbids bare names. Default: the HTTP bare order
// (path, query, form, body, header).
func BareOrder(srcs ...Source) Option {
	return func(c *config) { c.bare = slices.Clone(srcs) }
}

// MaxValueLen sets the longest value accepted for one placeholder, in bytes
// before encoding; a longer value is an ErrTooLong error. Values of n below
// 1 are ignored. Default DefaultMaxValueLen (256).
func MaxValueLen(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxValueLen = n
		}
	}
}

// HTTP restricts a template to the sources of HTTP adapters (path, query,
// header, form, body, ctx) with the HTTP bare order: a bare {name} is
// looked up in path, then query, form, body, header; ctx is never tried for
// a bare name (a trusted value is named explicitly, {ctx.user}). The HTTP
// adapters (net/http, chi, Gin, Echo, Fiber) apply it to every template
// they are given.
func HTTP() Option {
	return func(c *config) { c.allowed, c.bare = httpSources, httpBareOrder }
}

// GRPC restricts a template to the sources of gRPC interceptors (field, md,
// ctx) with the gRPC bare order: a bare {name} is the request message field
// only. The gRPC and Connect interceptors apply it to every template they
// are given.
func GRPC() Option {
	return func(c *config) { c.allowed, c.bare = grpcSources, grpcBareOrder }
}

// Template is a compiled key template. It is immutable and safe for
// concurrent use; build it once, when the route is set up, with Compile,
// MustCompile or the builders (Join).
type Template struct {
	text   string
	parts  []Part
	opts   []Option
	cfg    config
	escape [256]bool // bytes of values that are percent-encoded
	uses   [SourceMD + 1]bool
	fixed  int // bytes of literal text
}

// Compile parses a template such as "order:{query.user_id}:{path.voucher}".
// Literal text is copied into the key; {source.name} and bare {name}
// placeholders are replaced by the request's values, encoded so that
// different values never give the same key (see Key). A placeholder may end
// in a type, {query.user_id:int}, {path.id:uint}, {header.X-Tenant:uuid},
// {user_id:int}: its value is parsed and canonicalised (see ValueType).
// Literal text may not contain '%', control characters or braces; names may
// not contain ':' (it starts the type), braces, '%', spaces or control
// characters; two placeholders must be separated by literal text.
//
// Errors: a *Error with reason ErrBadTemplate for unbalanced braces, an
// empty name, an unknown source prefix ({usr.id}), an unknown or empty type
// ({query.x:float}, {query.x:}), a source not allowed by the options, a
// bare name when the bare order is empty, or adjacent placeholders.
// Defaults: all sources allowed, the HTTP bare order (see HTTP), MaxValueLen
// DefaultMaxValueLen.
func Compile(text string, opts ...Option) (*Template, error) {
	parts, err := parse(text)
	if err != nil {
		return nil, err
	}
	return build(text, parts, opts)
}

// MustCompile is Compile that panics on error, for templates fixed in the
// program (package-level variables, route setup).
func MustCompile(text string, opts ...Option) *Template {
	t, err := Compile(text, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

func parse(text string) ([]Part, error) {
	if text == "" {
		return nil, badTemplate(text, "empty template")
	}
	var parts []Part
	rest := text
	for rest != "" {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			parts = append(parts, Part{Source: SourceLiteral, Name: rest})
			break
		}
		if i > 0 {
			parts = append(parts, Part{Source: SourceLiteral, Name: rest[:i]})
		}
		if rest[i] == '}' {
			return nil, badTemplate(text, "unbalanced '}'")
		}
		rest = rest[i+1:]
		j := strings.IndexAny(rest, "{}")
		if j < 0 || rest[j] == '{' {
			return nil, badTemplate(text, "unbalanced '{'")
		}
		p, err := parsePlaceholder(text, rest[:j])
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
		rest = rest[j+1:]
	}
	return parts, nil
}

// parsePlaceholder parses the text between braces: [source.]name[:type].
// The type follows the last ':'; checkName rejects any ':' left in the
// name.
func parsePlaceholder(text, inner string) (Part, error) {
	if inner == "" {
		return Part{}, badTemplate(text, "empty placeholder {}")
	}
	ref, typ := inner, TypeNone
	if i := strings.LastIndexByte(inner, ':'); i >= 0 {
		ref = inner[:i]
		tname := inner[i+1:]
		if tname == "" {
			return Part{}, badTemplate(text, "empty type in {"+inner+"}")
		}
		t, ok := parseType(tname)
		if !ok {
			return Part{}, badTemplate(text, "unknown type \""+tname+"\" in {"+inner+"} (types: int, uint, uuid)")
		}
		typ = t
	}
	prefix, name, dotted := strings.Cut(ref, ".")
	if !dotted {
		return Part{Source: SourceAuto, Name: ref, Type: typ}, nil
	}
	src, ok := parseSource(prefix)
	if !ok {
		return Part{}, badTemplate(text, "unknown source \""+prefix+"\" in {"+inner+"}")
	}
	return Part{Source: src, Name: name, Type: typ}, nil
}

// build validates parts under opts and compiles them.
func build(text string, parts []Part, opts []Option) (*Template, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	for _, s := range cfg.bare {
		if !slices.Contains(cfg.allowed, s) {
			return nil, badTemplate(text, "bare order names source \""+s.String()+"\", which is not allowed")
		}
	}
	t := &Template{text: text, parts: slices.Clone(parts), opts: slices.Clone(opts), cfg: cfg}
	t.escape['%'] = true
	t.escape[':'] = true
	if len(parts) == 0 {
		return nil, badTemplate(text, "empty template")
	}
	prevPlaceholder := false
	for _, p := range parts {
		if p.Source == SourceLiteral {
			if p.Name == "" {
				return nil, badTemplate(text, "empty literal")
			}
			if p.Type != TypeNone {
				return nil, badTemplate(text, "literal text \""+p.Name+"\" cannot have a type")
			}
			if err := checkLiteral(text, p.Name); err != nil {
				return nil, err
			}
			if prevPlaceholder {
				// The first byte of a literal that follows a placeholder
				// ends that placeholder's value: values may not hold it raw.
				t.escape[p.Name[0]] = true
			}
			t.fixed += len(p.Name)
			prevPlaceholder = false
			continue
		}
		if err := checkName(text, p); err != nil {
			return nil, err
		}
		if p.Type > TypeUUID {
			return nil, badTemplate(text, "unknown type "+p.Type.String()+" in {"+p.String()+"}")
		}
		if p.Source == SourceAuto {
			if len(cfg.bare) == 0 {
				return nil, badTemplate(text, "bare name {"+p.Name+"} needs a source prefix here")
			}
			for _, s := range cfg.bare {
				t.uses[s] = true
			}
		} else {
			if p.Source > SourceMD {
				return nil, badTemplate(text, "unknown source in "+p.placeholder())
			}
			if !slices.Contains(cfg.allowed, p.Source) {
				return nil, badTemplate(text, "source \""+p.Source.String()+"\" is not supported here")
			}
			t.uses[p.Source] = true
		}
		if prevPlaceholder {
			return nil, badTemplate(text, "placeholders must be separated by literal text before "+p.placeholder())
		}
		prevPlaceholder = true
	}
	return t, nil
}

func checkLiteral(text, lit string) error {
	for i := 0; i < len(lit); i++ {
		switch c := lit[i]; {
		case c == '{' || c == '}':
			return badTemplate(text, "brace in literal text")
		case c == '%':
			return badTemplate(text, "'%' in literal text (it is the escape character of values)")
		case c < 0x20 || c == 0x7f:
			return badTemplate(text, "control character in literal text")
		}
	}
	if !validText(lit) {
		return badTemplate(text, "control character or invalid UTF-8 in literal text")
	}
	return nil
}

// checkName accepts names of printable characters other than braces,
// spaces, '%' and ':' (which starts the type, so a name holding it could
// not be written in a template), and, for nested sources, dotted paths
// without empty segments.
func checkName(text string, p Part) error {
	if p.Name == "" {
		return badTemplate(text, "empty name in "+p.placeholder())
	}
	for i := 0; i < len(p.Name); i++ {
		c := p.Name[i]
		if c <= ' ' || c == 0x7f || c == '{' || c == '}' || c == '%' {
			return badTemplate(text, "bad character in placeholder name")
		}
		if c == ':' {
			return badTemplate(text, "':' in placeholder name (it starts a type, as in {query.id:int})")
		}
	}
	if !validText(p.Name) {
		return badTemplate(text, "invalid UTF-8 in placeholder name")
	}
	if p.Source == SourceAuto && strings.Contains(p.Name, ".") {
		return badTemplate(text, "unknown source in "+p.placeholder())
	}
	if p.Source.Nested() {
		for _, seg := range SplitPath(p.Name) {
			if seg == "" {
				return badTemplate(text, "empty path segment in "+p.placeholder())
			}
		}
	}
	return nil
}

// For returns the template re-validated with extra options applied after
// its own: adapters call it with HTTP() or GRPC() to reject sources they
// cannot look up and to set their bare order. Errors as for Compile.
func (t *Template) For(opts ...Option) (*Template, error) {
	all := append(slices.Clone(t.opts), opts...)
	return build(t.text, t.parts, all)
}

// String returns the template text, types included
// ("order:{query.user_id:int}"); compiling it again gives an equivalent
// template.
func (t *Template) String() string { return t.text }

// Parts returns a copy of the template's parts in order.
func (t *Template) Parts() []Part { return slices.Clone(t.parts) }

// Uses reports whether building a key may look up src: a placeholder names
// it, or a bare name's order contains it. Adapters use it to read a body
// only when the key needs it (Uses(SourceBody) or Uses(SourceForm)).
func (t *Template) Uses(src Source) bool {
	return int(src) < len(t.uses) && t.uses[src]
}

// Key builds the key for one request, calling lookup for each placeholder
// (for a bare name, for each source of the bare order until a non-empty
// value is found). Values are checked and encoded: '%', ':' and the first
// byte of every literal that follows a placeholder are percent-encoded
// ("a:b" becomes "a%3Ab"), other bytes are kept, so plain values such as
// "42" read as-is. Since a value cannot hold the byte that starts the
// literal after it raw, and '%' (never part of literal text) only starts an
// escape, the key splits back into its values in exactly one way: two
// different sets of values never give the same key.
//
// The value of a typed placeholder ({query.user_id:int}) is first parsed
// and replaced by its canonical spelling ("007" and "+7" become "7"; see
// ValueType), and the checks and encoding apply to that: a non-canonical
// spelling maps to the same key. For a bare typed name, the first non-empty
// value of the bare order is parsed; one that does not parse is an error,
// not a reason to try the next source.
//
// Errors (as *Error naming the placeholder): ErrMissing for an absent or
// empty value (typed or not); ErrInvalidValue for a typed value that does
// not parse ("not an integer", "not a UUID", ...), control characters or
// invalid UTF-8; ErrTooLong for a value over MaxValueLen bytes or a key
// over MaxKeyLen bytes; an error from lookup, wrapped unless it is already a
// *Error.
func (t *Template) Key(lookup Lookup) (string, error) {
	var b strings.Builder
	b.Grow(t.fixed + 16*len(t.parts))
	for _, p := range t.parts {
		if p.Source == SourceLiteral {
			b.WriteString(p.Name)
			continue
		}
		v, err := t.value(p, lookup)
		if err != nil {
			return "", err
		}
		if p.Type != TypeNone {
			canon, bad := p.Type.canonical(v)
			if bad != "" {
				return "", &Error{Part: p.String(), Err: ErrInvalidValue, Detail: bad}
			}
			v = canon
		}
		if len(v) > t.cfg.maxValueLen {
			return "", &Error{Part: p.String(), Err: ErrTooLong, Detail: "over " + itoa(t.cfg.maxValueLen) + " bytes"}
		}
		if !validText(v) {
			return "", &Error{Part: p.String(), Err: ErrInvalidValue, Detail: "control character or invalid UTF-8"}
		}
		t.encode(&b, v)
		if b.Len() > MaxKeyLen {
			return "", &Error{Part: p.String(), Err: ErrTooLong, Detail: "key over " + itoa(MaxKeyLen) + " bytes"}
		}
	}
	if b.Len() > MaxKeyLen {
		return "", &Error{Part: t.text, Err: ErrTooLong, Detail: "key over " + itoa(MaxKeyLen) + " bytes"}
	}
	return b.String(), nil
}

func (t *Template) value(p Part, lookup Lookup) (string, error) {
	if p.Source != SourceAuto {
		return get(p, p.Source, lookup)
	}
	for _, s := range t.cfg.bare {
		v, err := get(p, s, lookup)
		if err == nil {
			return v, nil
		}
		var ke *Error
		if !asError(err, &ke) || ke.Err != ErrMissing {
			return "", err
		}
	}
	return "", &Error{Part: p.String(), Err: ErrMissing}
}

func get(p Part, s Source, lookup Lookup) (string, error) {
	v, ok, err := lookup(s, p.Name)
	if err != nil {
		var ke *Error
		if asError(err, &ke) {
			return "", err
		}
		return "", &Error{Part: p.String(), Err: err}
	}
	if !ok || v == "" {
		return "", &Error{Part: p.String(), Err: ErrMissing}
	}
	return v, nil
}
