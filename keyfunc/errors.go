package keyfunc

import "errors"

// Sentinel reasons carried by *Error. Match them with errors.Is.
var (
	// ErrMissing reports a placeholder whose value is absent or empty. No
	// key is built, so a request never locks on "order::".
	ErrMissing = errors.New("missing or empty value")

	// ErrTooLong reports a value longer than the template's limit
	// (MaxValueLen, default DefaultMaxValueLen bytes), or a key that would
	// exceed MaxKeyLen bytes once encoded.
	ErrTooLong = errors.New("value too long")

	// ErrInvalidValue reports a value with a control character or invalid
	// UTF-8, the value of a typed placeholder that does not parse
	// ({query.user_id:int} given "1.0"), a JSON body that is not valid JSON,
	// or a field that is an object or an array rather than a scalar.
	ErrInvalidValue = errors.New("invalid value")

	// ErrBadTemplate reports a malformed template or builder: unbalanced
	// braces, an empty name, an unknown or disallowed source, an unknown or
	// empty type, adjacent placeholders, or a forbidden character in
	// literal text or a name. It is returned by Compile, Join and
	// (*Template).For, never at request time.
	ErrBadTemplate = errors.New("bad key template")

	// ErrBodyTooLarge reports a request body over the bound given to
	// ReadBody. HTTP adapters answer 413.
	ErrBodyTooLarge = errors.New("request body too large")
)

// Error is the error returned (as *Error) by Compile, Join, For and
// (*Template).Key. It names the part of the template at fault and carries
// one of the sentinel reasons as Err; use errors.As(err, &e) with
// e *keyfunc.Error to read Part, and errors.Is(err, keyfunc.ErrMissing) (or
// another sentinel) to read the reason.
//
// Its text names the part and the reason and never includes the value
// itself, so adapters may send it to the client in a 400 answer. Errors of
// a request (every reason but ErrBadTemplate) read
// "query.user_id: missing or empty value" or
// "query.user_id: invalid value: not an integer", without the package
// name; setup errors (ErrBadTemplate), meant for developers, start with
// "keyfunc: ".
type Error struct {
	// Part is the placeholder as written without braces ("query.user_id",
	// "body.user.id", or a bare "voucher"); for ErrBadTemplate, the template
	// text or the faulty piece of it.
	Part string
	// Err is the reason: ErrMissing, ErrTooLong, ErrInvalidValue,
	// ErrBadTemplate, ErrBodyTooLarge, or an error wrapping one of them.
	Err error
	// Detail adds context (for example "unknown source \"usr\""); it never
	// holds request data.
	Detail string
}

func (e *Error) Error() string {
	reason := "error"
	if e.Err != nil {
		reason = e.Err.Error()
	}
	s := e.Part + ": " + reason
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if errors.Is(e.Err, ErrBadTemplate) {
		s = "keyfunc: " + s
	}
	return s
}

// Unwrap returns the reason.
func (e *Error) Unwrap() error { return e.Err }

func badTemplate(part, detail string) *Error {
	return &Error{Part: part, Err: ErrBadTemplate, Detail: detail}
}
