package lockhttp

import (
	"context"
	"errors"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// The helpers behind the adapters' constructors keep what each adapter
// said on its own: a nil middleware on error, the first config only, and
// {ctx.name} from the framework's value first.
func TestAdapterHelpers(t *testing.T) {
	noLocker := errors.New("nil Locker")
	called := false
	newTemplate := func(*core.Locker, *keyfunc.Template, ...int) (func(), error) {
		called = true
		return func() {}, nil
	}
	if mw, err := NewFromKey(nil, "k:{query.id}", []int{1}, noLocker, newTemplate); mw != nil || err != noLocker || called {
		t.Errorf("NewFromKey(nil Locker) = %v, %v; NewTemplate called: %v", mw != nil, err, called)
	}

	if got := First([]string{"a", "b"}); got != "a" {
		t.Errorf("First = %q", got)
	}
	if got := First[string](nil); got != "" {
		t.Errorf("First(none) = %q", got)
	}

	ctx := keyfunc.WithValue(context.Background(), "user", "ctx")
	for _, tc := range []struct {
		stored any
		want   string
		ok     bool
	}{
		{"fw", "fw", true},
		{42, "42", true},
		{nil, "ctx", true},
		{struct{}{}, "ctx", true}, // not a key value: the context's
	} {
		if got, ok := ContextValue(tc.stored, ctx, "user"); got != tc.want || ok != tc.ok {
			t.Errorf("ContextValue(%v) = %q, %v; want %q", tc.stored, got, ok, tc.want)
		}
	}
	// The framework's value answers without the context being asked.
	asked := &askedContext{Context: ctx}
	if got, ok := ContextValue("fw", asked, "user"); got != "fw" || !ok || asked.n != 0 {
		t.Errorf("ContextValue(stored) = %q, %v; context asked %d times", got, ok, asked.n)
	}
	if _, ok := ContextValue(nil, context.Background(), "user"); ok {
		t.Error("ContextValue with nothing stored reports a value")
	}
}

// askedContext counts the calls of its Value.
type askedContext struct {
	context.Context
	n int
}

func (c *askedContext) Value(key any) any {
	c.n++
	return c.Context.Value(key)
}
