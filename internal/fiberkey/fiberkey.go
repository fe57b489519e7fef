// Package fiberkey is what the two Fiber adapters (fiberlock for Fiber v2
// and for v3) share: reading a request's key placeholders (Request), the
// Config and most of the shim (Shim). Both ctx types have the methods of
// Ctx and Handle, over the same fasthttp request. Values read from the ctx
// are only valid during the request; keyfunc's Key copies them into the
// key.
package fiberkey

import (
	"fmt"
	"mime"
	"mime/multipart"
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/lockgate/lockgate/keyfunc"
)

var (
	errBadForm = fmt.Errorf("%w: body is not a valid form", keyfunc.ErrInvalidValue)
	errBadPath = fmt.Errorf("%w: not a valid percent-encoding", keyfunc.ErrInvalidValue)
)

// Ctx is what Fiber v2's *fiber.Ctx and v3's fiber.Ctx both have.
type Ctx interface {
	Params(key string, defaultValue ...string) string
	Query(key string, defaultValue ...string) string
	Get(key string, defaultValue ...string) string
	Body() []byte
	MultipartForm() (*multipart.Form, error)
	Request() *fasthttp.Request
}

// Request resolves the placeholders of one request. Its functions take
// the ctx rather than capture it, so that building a Request allocates
// nothing.
type Request[C Ctx] struct {
	C C
	// Unescaped says whether the app decodes path parameters itself
	// (fiber.Config.UnescapePath); asked only of a parameter with a '%'.
	Unescaped func(c C) bool
	// Ctx reads {ctx.name} (the adapter's Config.ContextValue).
	Ctx  func(c C, name string) (string, bool)
	json *keyfunc.JSONBody
}

// Lookup is a keyfunc lookup for the request: path parameters decoded,
// query, headers, {ctx.name}, the JSON body, form fields.
func (q *Request[C]) Lookup(src keyfunc.Source, name string) (string, bool, error) {
	var v string
	switch src {
	case keyfunc.SourcePath:
		return q.param(name)
	case keyfunc.SourceQuery:
		v = q.C.Query(name)
	case keyfunc.SourceHeader:
		v = q.C.Get(name)
	case keyfunc.SourceCtx:
		return q.ctx(name)
	case keyfunc.SourceBody:
		if q.json == nil {
			q.json = keyfunc.NewJSONBody(q.C.Body())
		}
		return q.json.Lookup(name)
	case keyfunc.SourceForm:
		return q.form(name)
	}
	return v, v != "", nil
}

func (q *Request[C]) ctx(name string) (string, bool, error) {
	s, ok := q.Ctx(q.C, name)
	return s, ok, nil
}

// param reads a route parameter percent-decoded, as net/http's
// r.PathValue has it: Fiber routes on the raw path and leaves a parameter
// encoded unless the app's UnescapePath is set (then it is decoded
// already), and /seckill/%37 must not lock apart from /seckill/7, nor a%01b
// pass as free of control characters.
func (q *Request[C]) param(name string) (string, bool, error) {
	v := q.C.Params(name)
	if strings.IndexByte(v, '%') < 0 || q.Unescaped(q.C) {
		return v, v != "", nil
	}
	u, err := url.PathUnescape(v)
	if err != nil {
		return "", false, errBadPath
	}
	return u, u != "", nil
}

// form reads an urlencoded or multipart form field; other content types
// have no form fields. Fiber keeps the parsed form for the handler.
func (q *Request[C]) form(name string) (string, bool, error) {
	mt, _, err := mime.ParseMediaType(string(q.C.Request().Header.ContentType()))
	if err != nil {
		return "", false, nil
	}
	switch mt {
	case "application/x-www-form-urlencoded":
		v := string(q.C.Request().PostArgs().Peek(name))
		return v, v != "", nil
	case "multipart/form-data":
		f, err := q.C.MultipartForm()
		if err != nil {
			return "", false, errBadForm
		}
		if vs := f.Value[name]; len(vs) > 0 && vs[0] != "" {
			return vs[0], true, nil
		}
	}
	return "", false, nil
}
