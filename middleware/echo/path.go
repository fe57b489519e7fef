package echolock

import (
	"net/url"

	"github.com/labstack/echo/v4"
)

// param is the route parameter name, decoded. Echo's router matches the
// escaped path when the request's path has escapes that differ from Go's
// default encoding (r.URL.RawPath is set, "/v/a%3Ab") and then hands
// c.Param the value still escaped ("a%3Ab"), while a path without them
// gives it decoded ("/v/a:b" gives "a:b"). The key uses the decoded value
// in both cases, as (*http.Request).PathValue does, so that the two
// spellings of one value lock the same key.
func param(c echo.Context, name string) string {
	v := c.Param(name)
	if c.Request().URL.RawPath == "" {
		return v
	}
	// Go's URL parser keeps RawPath only when it is a valid encoding of
	// Path, so a segment of it decodes; the raw value is kept otherwise.
	if d, err := url.PathUnescape(v); err == nil {
		return d
	}
	return v
}
