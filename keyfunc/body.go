package keyfunc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// DefaultMaxBodySize is the default bound of a body read for a key (1 MiB);
// adapters expose their own setting.
const DefaultMaxBodySize = 1 << 20

// ReadBody reads all of r, at most limit bytes. A body over limit is an
// error matching ErrBodyTooLarge (adapters answer 413), and other read
// errors are returned as they are. A limit below 1 means DefaultMaxBodySize.
func ReadBody(r io.Reader, limit int64) ([]byte, error) {
	if limit < 1 {
		limit = DefaultMaxBodySize
	}
	if r == nil {
		return nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &Error{Part: "body", Err: ErrBodyTooLarge, Detail: "over " + strconv.FormatInt(limit, 10) + " bytes"}
	}
	return data, nil
}

// JSONBody looks up fields of a JSON document, parsing it once on the first
// Lookup. It is safe for concurrent use.
type JSONBody struct {
	data []byte
	once sync.Once
	root any
	err  error
}

// NewJSONBody returns a JSONBody over data, which it keeps (do not modify
// it). An empty or all-space body has no fields.
func NewJSONBody(data []byte) *JSONBody { return &JSONBody{data: data} }

var errNotJSON = fmt.Errorf("%w: body is not valid JSON", ErrInvalidValue)

func (b *JSONBody) parse() {
	if len(bytes.TrimSpace(b.data)) == 0 {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(b.data))
	dec.UseNumber()
	if err := dec.Decode(&b.root); err != nil {
		b.err = errNotJSON
		return
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		b.err = errNotJSON
		b.root = nil
	}
}

// Lookup returns the scalar at the dotted path ("user.id"; a decimal segment
// indexes an array): strings as they are, numbers as written in the JSON
// text (json.Number), booleans as "true"/"false". A missing field or null
// reports false. Errors (matching ErrInvalidValue): the body is not valid
// JSON, or the field is an object or an array.
func (b *JSONBody) Lookup(path string) (string, bool, error) {
	b.once.Do(b.parse)
	if b.err != nil {
		return "", false, b.err
	}
	cur := b.root
	for _, seg := range SplitPath(path) {
		switch x := cur.(type) {
		case map[string]any:
			cur = x[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return "", false, nil
			}
			cur = x[i]
		default:
			return "", false, nil
		}
	}
	switch x := cur.(type) {
	case nil:
		return "", false, nil
	case string:
		return x, true, nil
	case json.Number:
		return x.String(), true, nil
	case bool:
		return strconv.FormatBool(x), true, nil
	}
	return "", false, fmt.Errorf("%w: not a scalar (object or array)", ErrInvalidValue)
}
