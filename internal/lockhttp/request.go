package lockhttp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"

	"github.com/lockgate/lockgate/keyfunc"
)

// Request resolves a key template's placeholders for one *http.Request, as
// the adapters on net/http's request (httplock, ginlock, echolock) share
// it: the query, headers, JSON fields and form fields of the buffered body
// are read here; the path and context sources are the adapter's (its
// router's parameters, its context values).
//
// C is the adapter's handle on the request (*http.Request, *gin.Context,
// echo.Context), which Path and Ctx take rather than capture, so that they
// are set once at setup and building a Request allocates nothing.
type Request[C any] struct {
	R       *http.Request
	C       C
	MaxBody int64                                 // the multipart form's memory bound: the body bound
	Path    func(c C, name string) string         // the route parameter name, decoded
	Ctx     func(c C, name string) (string, bool) // a value earlier middleware stored

	data  []byte // the body, when ReadBody buffered it
	query url.Values
	json  *keyfunc.JSONBody
	form  url.Values
	fErr  error
	fDone bool
}

// ReadBody buffers the request's body (at most q.MaxBody bytes) for the
// key and puts a replay in its place, so that the handler reads it whole.
// It returns the status to answer when that fails: 413 for a body over the
// bound (also one a bound set in front cut off: *http.MaxBytesError), 400
// for a body that could not be read. A request without a body reads as
// empty.
func (q *Request[C]) ReadBody() (int, error) {
	r := q.R
	if r.Body == nil || r.Body == http.NoBody {
		return 0, nil
	}
	data, err := keyfunc.ReadBody(r.Body, q.MaxBody)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.Is(err, keyfunc.ErrBodyTooLarge) || errors.As(err, &mbe) {
			return http.StatusRequestEntityTooLarge, err
		}
		return http.StatusBadRequest, err
	}
	q.data = data
	r.Body = replay{Reader: bytes.NewReader(data), orig: r.Body}
	return 0, nil
}

// Key is the route's key for the request: the body read first when the
// key uses it (ReadBody), then the template's placeholders resolved. On
// failure it returns the status to answer: ReadBody's, or 400 for a key
// error.
func (q *Request[C]) Key(route *Route) (string, int, error) {
	if route.Body {
		if status, err := q.ReadBody(); err != nil {
			return "", status, err
		}
	}
	return route.Key(q.Lookup)
}

// Lookup is the template's lookup (keyfunc.Template.Key).
func (q *Request[C]) Lookup(src keyfunc.Source, name string) (string, bool, error) {
	switch src {
	case keyfunc.SourcePath:
		v := q.Path(q.C, name)
		return v, v != "", nil
	case keyfunc.SourceQuery:
		if q.query == nil {
			q.query = q.R.URL.Query()
		}
		v := q.query.Get(name)
		return v, v != "", nil
	case keyfunc.SourceHeader:
		v := q.R.Header.Get(name)
		return v, v != "", nil
	case keyfunc.SourceCtx:
		v, ok := q.Ctx(q.C, name)
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

var errBadForm = fmt.Errorf("%w: body is not a valid form", keyfunc.ErrInvalidValue)

// parseForm parses the buffered body as an urlencoded or multipart form,
// leaving the request untouched for the handler (the replay parses as
// usual). Other content types have no form fields.
func (q *Request[C]) parseForm() (url.Values, error) {
	mt, params, err := mime.ParseMediaType(q.R.Header.Get("Content-Type"))
	if err != nil {
		return nil, nil
	}
	switch mt {
	case "application/x-www-form-urlencoded":
		v, err := url.ParseQuery(string(q.data))
		if err != nil {
			return nil, errBadForm
		}
		return v, nil
	case "multipart/form-data":
		f, err := multipart.NewReader(bytes.NewReader(q.data), params["boundary"]).ReadForm(q.MaxBody)
		if err != nil {
			return nil, errBadForm
		}
		defer f.RemoveAll()
		return url.Values(f.Value), nil
	}
	return nil, nil
}

// replay gives the handler the buffered body and closes the original one.
type replay struct {
	*bytes.Reader
	orig io.Closer
}

func (b replay) Close() error { return b.orig.Close() }
