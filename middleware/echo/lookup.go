package echolock

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/lockgate/lockgate/keyfunc"
)

var errBadForm = fmt.Errorf("%w: body is not a valid form", keyfunc.ErrInvalidValue)

// request resolves placeholders for one request.
type request struct {
	cfg   *Config
	c     echo.Context
	r     *http.Request
	query url.Values
	data  []byte // the body, when the key needs it
	json  *keyfunc.JSONBody
	form  url.Values
	fErr  error
	fDone bool
}

func (q *request) lookup(src keyfunc.Source, name string) (string, bool, error) {
	switch src {
	case keyfunc.SourcePath:
		v := q.param(name)
		return v, v != "", nil
	case keyfunc.SourceQuery:
		if q.query == nil {
			q.query = q.c.QueryParams()
		}
		v := q.query.Get(name)
		return v, v != "", nil
	case keyfunc.SourceHeader:
		v := q.r.Header.Get(name)
		return v, v != "", nil
	case keyfunc.SourceCtx:
		v, ok := q.cfg.ContextValue(q.c, name)
		return v, ok, nil
	case keyfunc.SourceBody:
		if q.json == nil {
			q.json = keyfunc.NewJSONBody(q.data)
		}
		return q.json.Lookup(name)
	case keyfunc.SourceForm:
		if !q.fDone {
			q.fDone = true
			q.form, q.fErr = q.parseForm()
		}
		if q.fErr != nil {
			return "", false, q.fErr
		}
		v := q.form.Get(name)
		return v, v != "", nil
	}
	return "", false, nil
}

// param is the route parameter name, decoded. Echo's router matches the
// escaped path when the request's path has escapes that differ from Go's
// default encoding (r.URL.RawPath is set, "/v/a%3Ab") and then hands
// c.Param the value still escaped ("a%3Ab"), while a path without them
// gives it decoded ("/v/a:b" gives "a:b"). The key uses the decoded value
// in both cases, as (*http.Request).PathValue does, so that the two
// spellings of one value lock the same key.
func (q *request) param(name string) string {
	v := q.c.Param(name)
	if q.r.URL.RawPath == "" {
		return v
	}
	// Go's URL parser keeps RawPath only when it is a valid encoding of
	// Path, so a segment of it decodes; the raw value is kept otherwise.
	if d, err := url.PathUnescape(v); err == nil {
		return d
	}
	return v
}

// parseForm parses the buffered body as an urlencoded or multipart form,
// leaving the request untouched for the handler (which reads it with
// c.FormValue as usual). Other content types have no form fields.
func (q *request) parseForm() (url.Values, error) {
	mt, params, err := mime.ParseMediaType(q.r.Header.Get(echo.HeaderContentType))
	if err != nil {
		return nil, nil
	}
	switch mt {
	case echo.MIMEApplicationForm:
		v, err := url.ParseQuery(string(q.data))
		if err != nil {
			return nil, errBadForm
		}
		return v, nil
	case echo.MIMEMultipartForm:
		f, err := multipart.NewReader(bytes.NewReader(q.data), params["boundary"]).ReadForm(q.cfg.MaxBodySize)
		if err != nil {
			return nil, errBadForm
		}
		defer f.RemoveAll()
		return url.Values(f.Value), nil
	}
	return nil, nil
}

// restoredBody replays the buffered body to the handler and closes the
// original one.
type restoredBody struct {
	*bytes.Reader
	orig io.Closer
}

func (b restoredBody) Close() error { return b.orig.Close() }
