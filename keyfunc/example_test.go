package keyfunc_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockgate/lockgate/keyfunc"
)

func Example() {
	tmpl, err := keyfunc.Compile("order:{query.user_id}:{path.voucher}", keyfunc.HTTP())
	if err != nil {
		panic(err) // a malformed template fails here, at setup
	}
	request := map[string]string{"query.user_id": "42", "path.voucher": "7"}
	lookup := func(src keyfunc.Source, name string) (string, bool, error) {
		v, ok := request[src.String()+"."+name]
		return v, ok, nil
	}
	key, err := tmpl.Key(lookup)
	fmt.Println(key, err)

	delete(request, "query.user_id")
	_, err = tmpl.Key(lookup)
	var ke *keyfunc.Error
	if errors.As(err, &ke) && errors.Is(err, keyfunc.ErrMissing) {
		fmt.Println("400:", ke.Part)
	}
	// Output:
	// order:42:7 <nil>
	// 400: query.user_id
}

// A typed placeholder builds the key from the value the handler parses:
// every spelling of one user id gives one key, and a value that does not
// parse is a 400 naming the field.
func Example_typed() {
	tmpl := keyfunc.MustCompile("order:{query.user_id:int}", keyfunc.HTTP())
	for _, id := range []string{"007", "7", "+7", "7.0"} {
		key, err := tmpl.Key(func(src keyfunc.Source, name string) (string, bool, error) {
			return id, src == keyfunc.SourceQuery && name == "user_id", nil
		})
		if err != nil {
			fmt.Println("400:", err)
			continue
		}
		fmt.Println(key)
	}
	// Output:
	// order:7
	// order:7
	// order:7
	// 400: query.user_id: invalid value: not an integer
}

func ExampleJoin() {
	tmpl := keyfunc.MustJoin(keyfunc.Const("order"), keyfunc.Ctx("user"), keyfunc.Body("voucher.id"))
	fmt.Println(tmpl)

	ctx := keyfunc.WithValue(context.Background(), "user", 42) // set by auth middleware
	body := keyfunc.NewJSONBody([]byte(`{"voucher": {"id": "a:b"}}`))
	key, err := tmpl.Key(func(src keyfunc.Source, name string) (string, bool, error) {
		switch src {
		case keyfunc.SourceCtx:
			v, ok := keyfunc.ContextValue(ctx, name)
			return v, ok, nil
		case keyfunc.SourceBody:
			return body.Lookup(name)
		}
		return "", false, nil
	})
	fmt.Println(key, err)
	// Output:
	// order:{ctx.user}:{body.voucher.id}
	// order:42:a%3Ab <nil>
}

func ExampleCompile_error() {
	_, err := keyfunc.Compile("order:{usr.id}")
	fmt.Println(errors.Is(err, keyfunc.ErrBadTemplate))
	fmt.Println(err)
	// Output:
	// true
	// keyfunc: order:{usr.id}: bad key template: unknown source "usr" in {usr.id}
}
