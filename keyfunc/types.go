package keyfunc

import (
	"errors"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// ValueType is the type of a typed placeholder ({query.user_id:int}). A
// typed placeholder's value is parsed and replaced by its canonical
// spelling before the key is built, so every spelling the handler parses to
// the same value ("01", "+1", "1") gives the same key; a value that does
// not parse is an ErrInvalidValue error naming the placeholder.
type ValueType uint8

// The types of a placeholder. In a template, a type follows the name after
// a ':' ({path.id:uint}, {header.X-Tenant:uuid}, {user_id:int}).
const (
	// TypeNone marks an untyped placeholder ({query.user_id}), whose value
	// is used as it is, and literal text. It is never written in a
	// template.
	TypeNone ValueType = iota
	// TypeInt ("int") is a signed decimal integer that fits int64, accepted
	// exactly as strconv.ParseInt(v, 10, 64) accepts it (so "01", "+1" and
	// "-0" are accepted) and written as strconv.FormatInt writes it ("1",
	// "0").
	TypeInt
	// TypeUint ("uint") is a non-negative decimal integer that fits uint64,
	// with an optional leading '+' and leading zeros, written in canonical
	// decimal. A leading '-' is rejected, even in "-0".
	TypeUint
	// TypeUUID ("uuid") is a UUID in any form uuid.Parse of
	// github.com/google/uuid accepts (hyphenated, with a "urn:uuid:" prefix,
	// in braces, or 32 hex digits; in the 38-byte braced form, as in
	// uuid.Parse, the first and last bytes are not checked), written in
	// lower-case hyphenated form.
	TypeUUID
)

var typeNames = [...]string{
	TypeNone: "none",
	TypeInt:  "int",
	TypeUint: "uint",
	TypeUUID: "uuid",
}

// String returns the name used in templates ("int", "uint", "uuid"), or
// "none" for TypeNone.
func (t ValueType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// parseType maps a template type name to its ValueType; "none" is not a
// type of templates.
func parseType(name string) (ValueType, bool) {
	for t := TypeInt; t <= TypeUUID; t++ {
		if typeNames[t] == name {
			return t, true
		}
	}
	return 0, false
}

// canonical parses v as a value of type t and returns its canonical
// spelling, or, for a value that does not parse, a detail for the error
// (which never holds v).
func (t ValueType) canonical(v string) (canon, bad string) {
	switch t {
	case TypeInt:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return "", "not an integer in the int64 range"
			}
			return "", "not an integer"
		}
		return strconv.FormatInt(n, 10), ""
	case TypeUint:
		n, err := strconv.ParseUint(strings.TrimPrefix(v, "+"), 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return "", "not a non-negative integer in the uint64 range"
			}
			return "", "not a non-negative integer"
		}
		return strconv.FormatUint(n, 10), ""
	case TypeUUID:
		u, err := uuid.Parse(v)
		if err != nil {
			return "", "not a UUID"
		}
		return u.String(), ""
	}
	return v, ""
}
