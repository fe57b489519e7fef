package lockhttp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lockgate/lockgate/keyfunc"
)

// MisconfiguredError is the error of a 500 answer: the route's key
// template names a path parameter ({path.name}) that its route does not
// have, so no request can fill it. It is the server's error, never the
// client's; its text is logged, never sent.
type MisconfiguredError struct {
	Template string // the key template
	Route    string // the route's pattern, "(unknown)" when the router does not tell
	Err      error  // the key error (matches keyfunc.ErrMissing)
}

func (e *MisconfiguredError) Error() string {
	return fmt.Sprintf("lockgate: key template %q names a path parameter route %s does not have: %v", e.Template, e.Route, e.Err)
}

func (e *MisconfiguredError) Unwrap() error { return e.Err }

// MissingPathParam reports whether err is a key error for a {path.name}
// placeholder with no value, and returns name.
func MissingPathParam(err error) (string, bool) {
	var ke *keyfunc.Error
	if !errors.As(err, &ke) || !errors.Is(err, keyfunc.ErrMissing) {
		return "", false
	}
	name, ok := strings.CutPrefix(ke.Part, "path.")
	return name, ok
}

// RouteParams returns the names of the path parameters of a route pattern
// in the syntax of the routers the adapters run on: ":name" (Gin, Echo,
// Fiber, also ":name?" and ":name+"), "*name" (Gin), "{name}", "{name...}"
// (net/http) and "{name:regexp}" (chi). A pattern may begin with a method
// and a host ("POST example.com/v/{voucher}").
func RouteParams(pattern string) []string {
	var names []string
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case ':', '*':
			if i > 0 && pattern[i-1] != '/' {
				continue // a literal colon or star inside a segment
			}
			j := i + 1
			for j < len(pattern) && !strings.ContainsRune("/?+.-:*", rune(pattern[j])) {
				j++
			}
			if j > i+1 {
				names = append(names, pattern[i+1:j])
			}
			i = j - 1
		case '{':
			end := strings.IndexByte(pattern[i:], '}')
			if end < 0 {
				return names
			}
			inner := pattern[i+1 : i+end]
			inner, _, _ = strings.Cut(inner, ":")
			inner = strings.TrimSuffix(inner, "...")
			if inner != "" && inner != "$" {
				names = append(names, inner)
			}
			i += end
		}
	}
	return names
}

// HasParam reports whether route (a pattern, RouteParams) has the path
// parameter name.
func HasParam(route, name string) bool {
	for _, n := range RouteParams(route) {
		if n == name {
			return true
		}
	}
	return false
}

// CheckRoute checks at setup that every {path.name} placeholder of t is a
// parameter of route (a pattern, RouteParams): one that is not could never
// be filled, and is a *keyfunc.Error matching keyfunc.ErrBadTemplate naming
// the placeholder, the template and the route. An empty route checks
// nothing.
func CheckRoute(t *keyfunc.Template, route string) error {
	if route == "" || t == nil {
		return nil
	}
	for _, p := range t.Parts() {
		if p.Source != keyfunc.SourcePath || HasParam(route, p.Name) {
			continue
		}
		return &keyfunc.Error{Part: p.String(), Err: keyfunc.ErrBadTemplate,
			Detail: fmt.Sprintf("template %q: route %q has no parameter %q, so no request can fill it", t.String(), route, p.Name)}
	}
	return nil
}

// Constant reports whether t has no placeholder: every request of the
// route takes the same lock.
func Constant(t *keyfunc.Template) bool {
	for _, p := range t.Parts() {
		if !p.IsLiteral() {
			return false
		}
	}
	return true
}
