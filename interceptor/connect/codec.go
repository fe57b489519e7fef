package connectlock

import (
	"errors"
	"regexp"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// PlainCodecs returns a handler option that replaces connect's proto and
// JSON codecs ("proto", "json", "json; charset=utf-8") with ones that
// encode and decode the same way but whose decoding error reads "invalid
// request body", or "invalid request body: field user_id" when the JSON
// decoder names the field, instead of connect's "unmarshal into
// *pkg.Type: proto: ...", which names Go types and packages. Connect
// answers it CodeInvalidArgument as before ("unmarshal message: invalid
// request body: ..."). Give it to the handler constructor after any codec
// of your own, or not at all to keep connect's texts (the default).
func PlainCodecs() connect.HandlerOption {
	return connect.WithHandlerOptions(
		connect.WithCodec(plainCodec{name: "proto", binary: true}),
		connect.WithCodec(plainCodec{name: "json"}),
		connect.WithCodec(plainCodec{name: "json; charset=utf-8"}),
	)
}

// ErrInvalidBody is the error of a request body that does not decode
// (PlainCodecs); it wraps no decoder text.
var ErrInvalidBody = errors.New("invalid request body")

// plainCodec is connect's proto (binary) or JSON codec with plain
// decoding errors.
type plainCodec struct {
	name   string
	binary bool
}

func (c plainCodec) Name() string   { return c.name }
func (c plainCodec) IsBinary() bool { return c.binary }

func (c plainCodec) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, errNotMessage
	}
	if c.binary {
		return proto.Marshal(pm)
	}
	return protojson.MarshalOptions{}.Marshal(pm)
}

var errNotMessage = errors.New("not a protobuf message")

// jsonField finds the field protojson names in its error ("invalid value
// for int64 field userId: ...", "... field user_id ...").
var jsonField = regexp.MustCompile(`field "?([A-Za-z_][A-Za-z0-9_.]*)"?`)

func (c plainCodec) Unmarshal(data []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return errNotMessage
	}
	if c.binary {
		if proto.Unmarshal(data, pm) != nil {
			return ErrInvalidBody
		}
		return nil
	}
	if len(data) == 0 {
		return ErrInvalidBody
	}
	// As connect's: unknown fields are dropped, so that clients and
	// servers need not share one version of the schema.
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, pm); err != nil {
		if f := jsonField.FindStringSubmatch(err.Error()); f != nil {
			return &bodyError{field: f[1]}
		}
		return ErrInvalidBody
	}
	return nil
}

// bodyError is ErrInvalidBody naming the field at fault.
type bodyError struct{ field string }

func (e *bodyError) Error() string        { return ErrInvalidBody.Error() + ": field " + e.field }
func (e *bodyError) Is(target error) bool { return target == ErrInvalidBody }
