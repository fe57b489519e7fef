package keyfunc_test

import (
	"errors"
	"testing"

	"github.com/lockgate/lockgate/keyfunc"
)

func TestJoinEqualsTemplate(t *testing.T) {
	built, err := keyfunc.Join(keyfunc.Const("order"), keyfunc.Query("user_id"), keyfunc.Path("voucher"))
	if err != nil {
		t.Fatal(err)
	}
	text := keyfunc.MustCompile("order:{query.user_id}:{path.voucher}")
	if built.String() != text.String() {
		t.Fatalf("Join text %q, want %q", built.String(), text.String())
	}
	vals := values(map[string]string{"query.user_id": "a:b", "path.voucher": "7"})
	k1, err1 := built.Key(vals)
	k2, err2 := text.Key(vals)
	if err1 != nil || err2 != nil || k1 != k2 || k1 != "order:a%3Ab:7" {
		t.Fatalf("keys %q (%v) and %q (%v)", k1, err1, k2, err2)
	}
	all := keyfunc.MustJoin(keyfunc.Header("X-User-ID"), keyfunc.Form("f"), keyfunc.Body("a.b"),
		keyfunc.Ctx("user"), keyfunc.Field("o.id"), keyfunc.MD("m"), keyfunc.Any("id"))
	want := "{header.X-User-ID}:{form.f}:{body.a.b}:{ctx.user}:{field.o.id}:{md.m}:{id}"
	if all.String() != want {
		t.Fatalf("String = %q, want %q", all.String(), want)
	}
	re, err := keyfunc.Compile(all.String())
	if err != nil || len(re.Parts()) != len(all.Parts()) {
		t.Fatalf("round trip: %v", err)
	}
	for i, p := range re.Parts() {
		if p != all.Parts()[i] {
			t.Fatalf("round trip part %d: %+v != %+v", i, p, all.Parts()[i])
		}
	}
}

func TestJoinErrors(t *testing.T) {
	cases := map[string][]keyfunc.Part{
		"none":          nil,
		"empty name":    {keyfunc.Const("x"), keyfunc.Query("")},
		"brace const":   {keyfunc.Const("a{b"), keyfunc.Query("id")},
		"percent const": {keyfunc.Const("a%"), keyfunc.Query("id")},
		"dotted bare":   {keyfunc.Const("a"), keyfunc.Any("a.b")},
	}
	for name, parts := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := keyfunc.Join(parts...); !errors.Is(err, keyfunc.ErrBadTemplate) {
				t.Fatalf("Join: %v, want ErrBadTemplate", err)
			}
		})
	}
	if _, err := keyfunc.JoinWith("", []keyfunc.Part{keyfunc.Query("a"), keyfunc.Query("b")}); !errors.Is(err, keyfunc.ErrBadTemplate) {
		t.Fatalf("adjacent without separator: %v", err)
	}
	tmpl, err := keyfunc.JoinWith("/", []keyfunc.Part{keyfunc.Const("o"), keyfunc.Path("v")}, keyfunc.HTTP())
	if err != nil || tmpl.String() != "o/{path.v}" {
		t.Fatalf("JoinWith: %v, %v", tmpl, err)
	}
}
