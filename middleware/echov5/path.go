package echolock

import (
	"net/url"
	"strings"

	"github.com/labstack/echo/v5"
)

// param is the route parameter name, decoded, as (*http.Request).PathValue
// gives it, so that the two spellings of one value ("/v/a:b" and
// "/v/a%3Ab") lock the same key. Echo's default router matches the escaped
// path when the request's path has escapes that differ from Go's default
// encoding (r.URL.RawPath is set) and then hands c.Param the value still
// escaped ("a%3Ab"); with echo.RouterConfig's UnescapePathParamValues or
// UseEscapedPathForMatching it hands it on decoded. The value is decoded
// here only in the first case, never twice ("100%2525" is "100%25").
func param(c *echo.Context, name string) string {
	v := c.Param(name)
	u := c.Request().URL
	if u.RawPath == "" || decodedValues(c.Path(), c.PathValues(), u.Path) {
		return v
	}
	// Go's URL parser keeps RawPath only when it is a valid encoding of
	// Path, so a segment of it decodes; the raw value is kept otherwise.
	if d, err := url.PathUnescape(v); err == nil {
		return d
	}
	return v
}

// decodedValues reports whether the route's pattern with the router's
// values in place of its parameters (":name" up to the next '/', and "*",
// in order) spells the decoded path: the router handed the values on
// decoded.
func decodedValues(pattern string, values echo.PathValues, path string) bool {
	for {
		i := strings.IndexAny(pattern, ":*")
		if i < 0 {
			return len(values) == 0 && path == pattern
		}
		if !strings.HasPrefix(path, pattern[:i]) || len(values) == 0 {
			return false
		}
		path = path[i:]
		if pattern[i] == '*' {
			pattern = pattern[i+1:]
		} else if j := strings.IndexByte(pattern[i:], '/'); j >= 0 {
			pattern = pattern[i+j:]
		} else {
			pattern = ""
		}
		v := values[0].Value
		if !strings.HasPrefix(path, v) {
			return false
		}
		path, values = path[len(v):], values[1:]
	}
}
