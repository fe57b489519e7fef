package rpclock

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/lockgate/lockgate/keyfunc"
)

// ErrNotProto is the reason of a key error for a request that is not a
// protobuf message (a custom codec); it never happens with generated code.
var ErrNotProto = errors.New("request is not a protobuf message")

// Metadata looks up the first value of the call's metadata key name
// ({md.name}): gRPC's incoming metadata, a Connect call's request headers.
// ok is false when the key is absent; an error (a -bin value that does not
// decode) makes the key invalid, naming the placeholder.
type Metadata func(name string) (value string, ok bool, err error)

// Key is a compiled key template with the field paths it reads, resolved
// against the method's request descriptor at start-up.
type Key struct {
	tmpl  *keyfunc.Template
	paths map[string][]protoreflect.FieldDescriptor // placeholder name → fields, for field and bare parts
}

// compileKey compiles text with keyfunc's gRPC sources and checks every
// message field it names against md's request type. Client-streaming and
// bidi methods may not name message fields.
func compileKey(text string, md protoreflect.MethodDescriptor) (*Key, error) {
	if text == "" {
		return nil, errors.New("key is empty")
	}
	t, err := keyfunc.Compile(text, keyfunc.GRPC())
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", text, err)
	}
	k := &Key{tmpl: t, paths: map[string][]protoreflect.FieldDescriptor{}}
	for _, p := range t.Parts() {
		if p.Source != keyfunc.SourceField && p.Source != keyfunc.SourceAuto {
			continue
		}
		if md.IsStreamingClient() {
			return nil, fmt.Errorf("key %q: {%s} names a request message field, but a client-streaming or bidi method has no single request: lock on metadata ({md.name}) or a context value ({ctx.name})", text, p)
		}
		path, err := resolvePath(md.Input(), p.Name)
		if err == nil {
			err = checkType(p.Type, path[len(path)-1])
		}
		if err != nil {
			return nil, fmt.Errorf("key %q: {%s}: %w", text, placeholder(p), err)
		}
		k.paths[p.Name] = path
	}
	return k, nil
}

// placeholder writes p as in the template, with its type.
func placeholder(p keyfunc.Part) string {
	if p.Type == keyfunc.TypeNone {
		return p.String()
	}
	return p.String() + ":" + p.Type.String()
}

// checkType rejects a typed placeholder whose type can never parse from the
// text of the field fd (see fieldValue for how fields are rendered): a
// string field takes every type; an integer field takes int and uint (a
// negative value of a signed field typed uint, or an unsigned value over
// the int64 range typed int, is rejected per call); bool, enum and bytes
// fields take none (enums are rendered by name, bytes are raw bytes, not
// the text a type parses).
func checkType(t keyfunc.ValueType, fd protoreflect.FieldDescriptor) error {
	if t == keyfunc.TypeNone {
		return nil
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		return nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if t == keyfunc.TypeInt || t == keyfunc.TypeUint {
			return nil
		}
	}
	return fmt.Errorf("field %s has type %s, whose value never parses as :%s; drop the type or lock on a string field",
		fd.FullName(), fd.Kind(), t)
}

// UsesMessage reports whether building the key reads the request message.
func (k *Key) UsesMessage() bool { return len(k.paths) > 0 }

// resolvePath finds the fields of the dotted path name in msg: every
// segment but the last a singular message field, the last a singular scalar
// (string, bytes, bool, integer or enum). Segments match the proto field
// name, or else the JSON name.
func resolvePath(msg protoreflect.MessageDescriptor, name string) ([]protoreflect.FieldDescriptor, error) {
	segs := keyfunc.SplitPath(name)
	path := make([]protoreflect.FieldDescriptor, 0, len(segs))
	for i, seg := range segs {
		fields := msg.Fields()
		fd := fields.ByName(protoreflect.Name(seg))
		if fd == nil {
			fd = fields.ByJSONName(seg)
		}
		if fd == nil {
			return nil, fmt.Errorf("message %s has no field %q", msg.FullName(), seg)
		}
		if fd.IsList() || fd.IsMap() {
			return nil, fmt.Errorf("field %s is repeated or a map; a key needs a single value", fd.FullName())
		}
		path = append(path, fd)
		last := i == len(segs)-1
		isMsg := fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind
		switch {
		case !last && !isMsg:
			return nil, fmt.Errorf("field %s is not a message, so it has no field %q", fd.FullName(), segs[i+1])
		case !last:
			msg = fd.Message()
		case isMsg:
			return nil, fmt.Errorf("field %s is a message; name one of its scalar fields (%s.<field>)", fd.FullName(), name)
		case fd.Kind() == protoreflect.FloatKind || fd.Kind() == protoreflect.DoubleKind:
			return nil, fmt.Errorf("field %s is a floating-point number, which makes a poor lock key", fd.FullName())
		}
	}
	return path, nil
}

// Build returns the lock name for one call; keyfunc canonicalises the
// values of typed placeholders ("01" and "1" give one key for :int). msg
// may be nil when the key reads no field; md answers {md.name}. Errors are
// *keyfunc.Error naming the placeholder.
func (k *Key) Build(ctx context.Context, msg protoreflect.Message, md Metadata) (string, error) {
	return k.tmpl.Key(func(src keyfunc.Source, name string) (string, bool, error) {
		switch src {
		case keyfunc.SourceField:
			if msg == nil {
				return "", false, ErrNotProto
			}
			return fieldValue(msg, k.paths[name])
		case keyfunc.SourceMD:
			if md == nil {
				return "", false, nil
			}
			return md(name)
		case keyfunc.SourceCtx:
			v, ok := keyfunc.ContextValue(ctx, name)
			return v, ok, nil
		}
		return "", false, nil
	})
}

// fieldValue walks path in msg. An unset field (for proto3 scalars without
// presence: a zero value) is missing.
func fieldValue(msg protoreflect.Message, path []protoreflect.FieldDescriptor) (string, bool, error) {
	for _, fd := range path[:len(path)-1] {
		if !msg.Has(fd) {
			return "", false, nil
		}
		msg = msg.Get(fd).Message()
	}
	fd := path[len(path)-1]
	if !msg.Has(fd) {
		return "", false, nil
	}
	v := msg.Get(fd)
	switch fd.Kind() {
	case protoreflect.StringKind:
		return v.String(), true, nil
	case protoreflect.BytesKind:
		return string(v.Bytes()), true, nil
	case protoreflect.BoolKind:
		return strconv.FormatBool(v.Bool()), true, nil
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name()), true, nil
		}
		return strconv.FormatInt(int64(v.Enum()), 10), true, nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.FormatInt(v.Int(), 10), true, nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.FormatUint(v.Uint(), 10), true, nil
	}
	return "", false, keyfunc.ErrInvalidValue
}
