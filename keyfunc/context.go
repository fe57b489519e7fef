package keyfunc

import (
	"context"
	"fmt"
	"strconv"
)

type ctxKey struct{ name string }

// WithValue returns a copy of ctx carrying value under name, for {ctx.name}
// placeholders. Authentication middleware use it to publish the
// authenticated user id, which is what a service should lock on rather than
// a client-supplied id. value is rendered by FormatValue when a key is
// built.
func WithValue(ctx context.Context, name string, value any) context.Context {
	return context.WithValue(ctx, ctxKey{name}, value)
}

// ContextValue returns the value stored by WithValue under name, rendered
// by FormatValue, and whether there is one.
func ContextValue(ctx context.Context, name string) (string, bool) {
	v := ctx.Value(ctxKey{name})
	if v == nil {
		return "", false
	}
	return FormatValue(v)
}

// FormatValue renders a context or message value as key text: strings and
// byte slices as they are, integers in decimal, booleans as "true"/"false",
// and anything with a String method through it. It reports false for nil
// and other types.
func FormatValue(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return string(x), true
	case int:
		return strconv.Itoa(x), true
	case int8:
		return strconv.FormatInt(int64(x), 10), true
	case int16:
		return strconv.FormatInt(int64(x), 10), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint:
		return strconv.FormatUint(uint64(x), 10), true
	case uint8:
		return strconv.FormatUint(uint64(x), 10), true
	case uint16:
		return strconv.FormatUint(uint64(x), 10), true
	case uint32:
		return strconv.FormatUint(uint64(x), 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case bool:
		return strconv.FormatBool(x), true
	case fmt.Stringer:
		return x.String(), true
	}
	return "", false
}
