package keyfunc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/keyfunc"
)

func TestJSONBody(t *testing.T) {
	body := keyfunc.NewJSONBody([]byte(`{"user":{"id":42,"name":"Zoë","vip":true,"ref":null,"tags":["a","b"]},
		"price":1.50,"big":1e3,"huge":123456789012345678901234567890,"items":[{"sku":"x-1"}]}`))
	cases := []struct {
		path string
		want string
		ok   bool
		err  error
	}{
		{"user.id", "42", true, nil},
		{"user.name", "Zoë", true, nil},
		{"user.vip", "true", true, nil},
		{"price", "1.50", true, nil},
		{"big", "1e3", true, nil},
		{"huge", "123456789012345678901234567890", true, nil},
		{"items.0.sku", "x-1", true, nil},
		{"items.1.sku", "", false, nil},
		{"user.ref", "", false, nil},
		{"user.missing", "", false, nil},
		{"user.id.deeper", "", false, nil},
		{"user", "", false, keyfunc.ErrInvalidValue},
		{"user.tags", "", false, keyfunc.ErrInvalidValue},
	}
	for _, c := range cases {
		got, ok, err := body.Lookup(c.path)
		if got != c.want || ok != c.ok || !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("Lookup(%q) = %q, %v, %v; want %q, %v, %v", c.path, got, ok, err, c.want, c.ok, c.err)
		}
	}
	for _, bad := range []string{`{"a":`, `{"a":1} trailing`, `not json`} {
		if _, _, err := keyfunc.NewJSONBody([]byte(bad)).Lookup("a"); !errors.Is(err, keyfunc.ErrInvalidValue) {
			t.Errorf("body %q: err %v, want ErrInvalidValue", bad, err)
		}
	}
	if v, ok, err := keyfunc.NewJSONBody([]byte("  \n")).Lookup("a"); ok || err != nil {
		t.Errorf("empty body: %q, %v, %v; want missing", v, ok, err)
	}
}

func TestReadBody(t *testing.T) {
	data, err := keyfunc.ReadBody(strings.NewReader("12345"), 5)
	if err != nil || string(data) != "12345" {
		t.Fatalf("at the limit: %q, %v", data, err)
	}
	_, err = keyfunc.ReadBody(strings.NewReader("123456"), 5)
	var ke *keyfunc.Error
	if !errors.Is(err, keyfunc.ErrBodyTooLarge) || !errors.As(err, &ke) || ke.Part != "body" {
		t.Fatalf("over the limit: %v, want ErrBodyTooLarge naming body", err)
	}
	big := strings.Repeat("x", keyfunc.DefaultMaxBodySize+1)
	if _, err := keyfunc.ReadBody(strings.NewReader(big), 0); !errors.Is(err, keyfunc.ErrBodyTooLarge) {
		t.Fatalf("default limit: %v", err)
	}
}

type stringer struct{}

func (stringer) String() string { return "S" }

func TestContextValue(t *testing.T) {
	ctx := keyfunc.WithValue(context.Background(), "user", int64(-7))
	if v, ok := keyfunc.ContextValue(ctx, "user"); !ok || v != "-7" {
		t.Fatalf("ContextValue = %q, %v", v, ok)
	}
	if _, ok := keyfunc.ContextValue(ctx, "other"); ok {
		t.Fatal("ContextValue found an absent name")
	}
	for v, want := range map[any]string{"s": "s", 1: "1", uint8(2): "2", true: "true", stringer{}: "S"} {
		if got, ok := keyfunc.FormatValue(v); !ok || got != want {
			t.Errorf("FormatValue(%#v) = %q, %v", v, got, ok)
		}
	}
	if _, ok := keyfunc.FormatValue(time.Duration(0).Seconds()); ok {
		t.Error("FormatValue(float64) accepted")
	}
}
