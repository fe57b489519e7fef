package fiberlock

import (
	"fmt"
	"mime"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v3"

	"github.com/lockgate/lockgate/keyfunc"
)

var (
	errBadForm = fmt.Errorf("%w: body is not a valid form", keyfunc.ErrInvalidValue)
	errBadPath = fmt.Errorf("%w: not a valid percent-encoding", keyfunc.ErrInvalidValue)
)

// request resolves placeholders for one request. Values read from the
// Fiber ctx are only valid during the request; Key copies them into the key.
type request struct {
	cfg  *Config
	c    fiber.Ctx
	json *keyfunc.JSONBody
}

func (q *request) lookup(src keyfunc.Source, name string) (string, bool, error) {
	var v string
	switch src {
	case keyfunc.SourcePath:
		return q.param(name)
	case keyfunc.SourceQuery:
		v = q.c.Query(name)
	case keyfunc.SourceHeader:
		v = q.c.Get(name)
	case keyfunc.SourceCtx:
		s, ok := q.cfg.ContextValue(q.c, name)
		return s, ok, nil
	case keyfunc.SourceBody:
		if q.json == nil {
			q.json = keyfunc.NewJSONBody(q.c.Body())
		}
		return q.json.Lookup(name)
	case keyfunc.SourceForm:
		return q.form(name)
	}
	return v, v != "", nil
}

// param reads a route parameter percent-decoded, as net/http's
// r.PathValue has it: Fiber leaves it encoded unless the app's
// UnescapePath is set (then it is decoded already), and /seckill/%37 must
// not lock apart from /seckill/7, nor a%01b pass as free of control
// characters.
func (q *request) param(name string) (string, bool, error) {
	v := q.c.Params(name)
	if strings.IndexByte(v, '%') < 0 || q.c.App().Config().UnescapePath {
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
func (q *request) form(name string) (string, bool, error) {
	mt, _, err := mime.ParseMediaType(string(q.c.Request().Header.ContentType()))
	if err != nil {
		return "", false, nil
	}
	switch mt {
	case fiber.MIMEApplicationForm:
		v := string(q.c.Request().PostArgs().Peek(name))
		return v, v != "", nil
	case fiber.MIMEMultipartForm:
		f, err := q.c.MultipartForm()
		if err != nil {
			return "", false, errBadForm
		}
		if vs := f.Value[name]; len(vs) > 0 && vs[0] != "" {
			return vs[0], true, nil
		}
	}
	return "", false, nil
}
