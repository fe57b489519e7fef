package keyfunc

import (
	"strconv"
	"strings"
)

// Source says where a placeholder's value comes from. Adapters receive it in
// their Lookup and decide which sources they support (see Sources).
type Source uint8

// The sources of a placeholder. In a template, a source is written as the
// prefix of a placeholder name: {path.voucher}, {query.user_id},
// {header.X-User-ID}, {form.sku}, {body.user.id}, {ctx.user},
// {field.order.id}, {md.x-user-id}. A placeholder without a known prefix
// (a bare {name}) is SourceAuto.
const (
	// SourceLiteral marks literal text in Parts; it is never looked up.
	SourceLiteral Source = iota
	// SourceAuto marks a bare {name}: the template's bare order (BareOrder)
	// is tried in turn and the first non-empty value wins.
	SourceAuto
	// SourcePath is a path parameter of the route (":voucher", "{voucher}").
	SourcePath
	// SourceQuery is a URL query parameter (first value).
	SourceQuery
	// SourceHeader is a request header (first value).
	SourceHeader
	// SourceForm is a field of a form body (urlencoded or multipart).
	SourceForm
	// SourceBody is a field of a JSON body; the name is a dotted path
	// ("user.id"; a decimal segment indexes an array).
	SourceBody
	// SourceCtx is a value earlier middleware put in the request context
	// (see WithValue), such as the authenticated user id.
	SourceCtx
	// SourceField is a field of a gRPC request message; the name is a dotted
	// path ("order.id").
	SourceField
	// SourceMD is a gRPC incoming metadata key (first value).
	SourceMD
)

var sourceNames = [...]string{
	SourceLiteral: "literal",
	SourceAuto:    "auto",
	SourcePath:    "path",
	SourceQuery:   "query",
	SourceHeader:  "header",
	SourceForm:    "form",
	SourceBody:    "body",
	SourceCtx:     "ctx",
	SourceField:   "field",
	SourceMD:      "md",
}

// String returns the prefix used in templates ("path", "query", ...).
func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "source(" + strconv.Itoa(int(s)) + ")"
}

// Nested reports whether names of this source are dotted paths into a
// structure (SourceBody, SourceField).
func (s Source) Nested() bool { return s == SourceBody || s == SourceField }

// parseSource maps a template prefix to its Source.
func parseSource(prefix string) (Source, bool) {
	for s := SourcePath; s <= SourceMD; s++ {
		if sourceNames[s] == prefix {
			return s, true
		}
	}
	return 0, false
}

// Sources and bare orders of the adapters, applied by HTTP and GRPC.
// Unexported so that no program can change what every adapter accepts.
var (
	// httpSources are the sources an HTTP adapter supports.
	httpSources = []Source{SourcePath, SourceQuery, SourceHeader, SourceForm, SourceBody, SourceCtx}
	// httpBareOrder is the lookup order of a bare {name} in HTTP adapters:
	// path, then query, form, body, header. ctx is never tried for a bare
	// name: a trusted value is named explicitly ({ctx.user}).
	httpBareOrder = []Source{SourcePath, SourceQuery, SourceForm, SourceBody, SourceHeader}
	// grpcSources are the sources a gRPC interceptor supports.
	grpcSources = []Source{SourceField, SourceMD, SourceCtx}
	// grpcBareOrder is the lookup order of a bare {name} in gRPC
	// interceptors: the request message field only.
	grpcBareOrder = []Source{SourceField}
)

// SplitPath splits the dotted name of a nested source ("user.id") into its
// segments. Compile guarantees that no segment is empty.
func SplitPath(name string) []string { return strings.Split(name, ".") }
