package ginlock

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/lockgate/lockgate/keyfunc"
)

// request resolves placeholders for one request.
type request struct {
	m     *middleware
	c     *gin.Context
	query url.Values
	data  []byte // the body, when the key needs it
	json  *keyfunc.JSONBody
	form  url.Values
	fErr  error
	fDone bool
}

var errBadForm = fmt.Errorf("%w: body is not a valid form", keyfunc.ErrInvalidValue)

func (q *request) lookup(src keyfunc.Source, name string) (string, bool, error) {
	switch src {
	case keyfunc.SourcePath:
		v := q.c.Param(name)
		return v, v != "", nil
	case keyfunc.SourceQuery:
		if q.query == nil {
			q.query = q.c.Request.URL.Query()
		}
		v := q.query.Get(name)
		return v, v != "", nil
	case keyfunc.SourceHeader:
		v := q.c.Request.Header.Get(name)
		return v, v != "", nil
	case keyfunc.SourceCtx:
		v, ok := q.m.o.contextValue(q.c, name)
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

// parseForm parses the buffered body as an urlencoded or multipart form,
// leaving the request untouched for the handler (c.PostForm parses the
// replayed body as usual). Other content types have no form fields.
func (q *request) parseForm() (url.Values, error) {
	mt, params, err := mime.ParseMediaType(q.c.Request.Header.Get("Content-Type"))
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
		f, err := multipart.NewReader(bytes.NewReader(q.data), params["boundary"]).ReadForm(q.m.o.maxBody)
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
