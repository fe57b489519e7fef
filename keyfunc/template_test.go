package keyfunc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/keyfunc"
)

// values is a Lookup over a map keyed by "source.name".
func values(m map[string]string) keyfunc.Lookup {
	return func(src keyfunc.Source, name string) (string, bool, error) {
		v, ok := m[src.String()+"."+name]
		return v, ok, nil
	}
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		name, text string
		opts       []keyfunc.Option
		detail     string
	}{
		{"empty", "", nil, "empty template"},
		{"unclosed", "order:{query.id", nil, "unbalanced '{'"},
		{"nested open", "order:{query.{id}}", nil, "unbalanced '{'"},
		{"stray close", "order:}x", nil, "unbalanced '}'"},
		{"empty placeholder", "order:{}", nil, "empty placeholder"},
		{"empty name", "order:{query.}", nil, "empty name"},
		{"unknown source", "order:{usr.id}", nil, `unknown source "usr"`},
		{"empty segment", "order:{body.user..id}", nil, "empty path segment"},
		{"adjacent", "order:{query.a}{query.b}", nil, "separated by literal text"},
		{"percent literal", "order%:{query.a}", nil, "'%' in literal"},
		{"control literal", "order\n:{query.a}", nil, "control character"},
		{"space in name", "order:{query.a b}", nil, "bad character"},
		{"not allowed", "order:{field.id}", []keyfunc.Option{keyfunc.HTTP()}, `source "field" is not supported`},
		{"md not allowed", "order:{path.id}", []keyfunc.Option{keyfunc.GRPC()}, `source "path" is not supported`},
		{"bare without order", "order:{id}", []keyfunc.Option{keyfunc.BareOrder()}, "needs a source prefix"},
		{"bare order not allowed", "order:{query.id}", []keyfunc.Option{keyfunc.Sources(keyfunc.SourceQuery)}, "bare order names source"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := keyfunc.Compile(c.text, c.opts...)
			if err == nil {
				t.Fatalf("Compile(%q) = %v, want error", c.text, tmpl)
			}
			var ke *keyfunc.Error
			if !errors.As(err, &ke) || !errors.Is(err, keyfunc.ErrBadTemplate) {
				t.Fatalf("err = %#v, want *keyfunc.Error with ErrBadTemplate", err)
			}
			if !strings.Contains(ke.Detail, c.detail) {
				t.Errorf("detail %q, want it to contain %q", ke.Detail, c.detail)
			}
		})
	}
}

func TestKey(t *testing.T) {
	tmpl := keyfunc.MustCompile("order:{query.user_id}:{path.voucher}")
	cases := []struct {
		name string
		vals map[string]string
		want string
		part string
		err  error
	}{
		{"plain", map[string]string{"query.user_id": "42", "path.voucher": "7"}, "order:42:7", "", nil},
		{"separator escaped", map[string]string{"query.user_id": "a:b", "path.voucher": "c"}, "order:a%3Ab:c", "", nil},
		{"escape escaped", map[string]string{"query.user_id": "50%", "path.voucher": "c"}, "order:50%25:c", "", nil},
		{"literal after value escaped", map[string]string{"query.user_id": "1-2", "path.voucher": "x"}, "order:1-2:x", "", nil},
		{"unicode kept", map[string]string{"query.user_id": "Zoë", "path.voucher": "{x}"}, "order:Zoë:{x}", "", nil},
		{"missing", map[string]string{"path.voucher": "7"}, "", "query.user_id", keyfunc.ErrMissing},
		{"empty", map[string]string{"query.user_id": "", "path.voucher": "7"}, "", "query.user_id", keyfunc.ErrMissing},
		{"too long", map[string]string{"query.user_id": "1", "path.voucher": strings.Repeat("v", keyfunc.DefaultMaxValueLen+1)}, "", "path.voucher", keyfunc.ErrTooLong},
		{"control", map[string]string{"query.user_id": "4\n2", "path.voucher": "7"}, "", "query.user_id", keyfunc.ErrInvalidValue},
		{"c1 control", map[string]string{"query.user_id": "4\u00852", "path.voucher": "7"}, "", "query.user_id", keyfunc.ErrInvalidValue},
		{"bad utf8", map[string]string{"query.user_id": "\xff", "path.voucher": "7"}, "", "query.user_id", keyfunc.ErrInvalidValue},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := tmpl.Key(values(c.vals))
			if c.err == nil {
				if err != nil || got != c.want {
					t.Fatalf("Key = %q, %v; want %q", got, err, c.want)
				}
				return
			}
			var ke *keyfunc.Error
			if !errors.As(err, &ke) || !errors.Is(err, c.err) {
				t.Fatalf("Key = %q, %v; want *Error %v", got, err, c.err)
			}
			if ke.Part != c.part || !strings.Contains(err.Error(), c.part) {
				t.Errorf("part %q (%q), want %q", ke.Part, err, c.part)
			}
			if got != "" {
				t.Errorf("key %q returned with an error", got)
			}
		})
	}
}

func TestKeyEscapesSeparators(t *testing.T) {
	tmpl := keyfunc.MustCompile("o-{query.a}-x{query.b}/{query.c}")
	got, err := tmpl.Key(values(map[string]string{"query.a": "1-2x", "query.b": "a/b-c", "query.c": "p/q:r%"}))
	if want := "o-1%2D2x-xa%2Fb%2Dc/p%2Fq%3Ar%25"; err != nil || got != want {
		t.Fatalf("Key = %q, %v; want %q", got, err, want)
	}
}

func TestKeyTotalLength(t *testing.T) {
	tmpl := keyfunc.MustCompile("k:{query.a}:{query.b}:{query.c}:{query.d}:{query.e}")
	v := strings.Repeat("::", 100) // 200 bytes, 600 encoded
	_, err := tmpl.Key(values(map[string]string{"query.a": v, "query.b": v, "query.c": "1", "query.d": "1", "query.e": "1"}))
	var ke *keyfunc.Error
	if !errors.As(err, &ke) || !errors.Is(err, keyfunc.ErrTooLong) || ke.Part != "query.b" {
		t.Fatalf("err = %v, want ErrTooLong naming query.b", err)
	}
	if keyfunc.MaxKeyLen != core.MaxKeyLen {
		t.Fatalf("keyfunc.MaxKeyLen %d != core.MaxKeyLen %d", keyfunc.MaxKeyLen, core.MaxKeyLen)
	}
}

func TestMaxValueLen(t *testing.T) {
	tmpl := keyfunc.MustCompile("k:{query.a}", keyfunc.MaxValueLen(3))
	if _, err := tmpl.Key(values(map[string]string{"query.a": "123"})); err != nil {
		t.Fatalf("3 bytes: %v", err)
	}
	if _, err := tmpl.Key(values(map[string]string{"query.a": "1234"})); !errors.Is(err, keyfunc.ErrTooLong) {
		t.Fatalf("4 bytes: %v, want ErrTooLong", err)
	}
}

func TestBareOrder(t *testing.T) {
	tmpl := keyfunc.MustCompile("v:{id}", keyfunc.HTTP())
	cases := []struct {
		name string
		vals map[string]string
		want string
	}{
		{"path first", map[string]string{"path.id": "p", "query.id": "q", "header.id": "h"}, "v:p"},
		{"then query", map[string]string{"path.id": "", "query.id": "q", "form.id": "f"}, "v:q"},
		{"then form", map[string]string{"form.id": "f", "body.id": "b"}, "v:f"},
		{"then body", map[string]string{"body.id": "b", "header.id": "h"}, "v:b"},
		{"header last", map[string]string{"header.id": "h", "ctx.id": "c"}, "v:h"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := tmpl.Key(values(c.vals))
			if err != nil || got != c.want {
				t.Fatalf("Key = %q, %v; want %q", got, err, c.want)
			}
		})
	}
	_, err := tmpl.Key(values(map[string]string{"ctx.id": "c"}))
	var ke *keyfunc.Error
	if !errors.As(err, &ke) || !errors.Is(err, keyfunc.ErrMissing) || ke.Part != "id" {
		t.Fatalf("ctx only: %v, want ErrMissing naming id (ctx is never tried for a bare name)", err)
	}
	g := keyfunc.MustCompile("v:{id}", keyfunc.GRPC())
	if got, err := g.Key(values(map[string]string{"field.id": "f", "md.id": "m"})); err != nil || got != "v:f" {
		t.Fatalf("grpc bare: %q, %v", got, err)
	}
}

func TestLookupError(t *testing.T) {
	tmpl := keyfunc.MustCompile("v:{body.a}:{id}")
	boom := errors.New("boom")
	_, err := tmpl.Key(func(src keyfunc.Source, name string) (string, bool, error) { return "", false, boom })
	var ke *keyfunc.Error
	if !errors.As(err, &ke) || !errors.Is(err, boom) || ke.Part != "body.a" {
		t.Fatalf("err = %v, want wrapped boom naming body.a", err)
	}
	own := &keyfunc.Error{Part: "body", Err: keyfunc.ErrBodyTooLarge}
	_, err = tmpl.Key(func(src keyfunc.Source, name string) (string, bool, error) { return "", false, own })
	if err != own {
		t.Fatalf("err = %v, want the lookup's own *Error", err)
	}
	// A bare name stops at the first source whose lookup fails.
	tmpl = keyfunc.MustCompile("v:{id}")
	_, err = tmpl.Key(func(src keyfunc.Source, name string) (string, bool, error) {
		if src == keyfunc.SourceBody {
			return "", false, keyfunc.ErrInvalidValue
		}
		return "", false, nil
	})
	if !errors.As(err, &ke) || !errors.Is(err, keyfunc.ErrInvalidValue) || ke.Part != "id" {
		t.Fatalf("bare: %v, want ErrInvalidValue naming id", err)
	}
}

func TestPartsAndUses(t *testing.T) {
	tmpl := keyfunc.MustCompile("order:{query.user_id}:{body.user.id}")
	want := []keyfunc.Part{
		{Source: keyfunc.SourceLiteral, Name: "order:"},
		{Source: keyfunc.SourceQuery, Name: "user_id"},
		{Source: keyfunc.SourceLiteral, Name: ":"},
		{Source: keyfunc.SourceBody, Name: "user.id"},
	}
	got := tmpl.Parts()
	if len(got) != len(want) {
		t.Fatalf("Parts = %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("part %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if !tmpl.Uses(keyfunc.SourceBody) || tmpl.Uses(keyfunc.SourceForm) || tmpl.Uses(keyfunc.SourcePath) {
		t.Fatal("Uses wrong for explicit sources")
	}
	bare := keyfunc.MustCompile("x:{id}", keyfunc.HTTP())
	if !bare.Uses(keyfunc.SourceBody) || !bare.Uses(keyfunc.SourceForm) || bare.Uses(keyfunc.SourceCtx) {
		t.Fatal("Uses wrong for a bare name")
	}
	if got[1].String() != "query.user_id" || got[0].IsLiteral() != true {
		t.Fatalf("Part.String = %q", got[1].String())
	}
}

func TestForRestricts(t *testing.T) {
	tmpl := keyfunc.MustCompile("x:{field.id}")
	if _, err := tmpl.For(keyfunc.HTTP()); !errors.Is(err, keyfunc.ErrBadTemplate) {
		t.Fatalf("For(HTTP) of a field template: %v, want ErrBadTemplate", err)
	}
	g, err := tmpl.For(keyfunc.GRPC())
	if err != nil {
		t.Fatal(err)
	}
	if k, err := g.Key(values(map[string]string{"field.id": "9"})); err != nil || k != "x:9" {
		t.Fatalf("Key = %q, %v", k, err)
	}
	// options given at Compile survive For
	short := keyfunc.MustCompile("x:{query.id}", keyfunc.MaxValueLen(2))
	h, err := short.For(keyfunc.HTTP())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Key(values(map[string]string{"query.id": "123"})); !errors.Is(err, keyfunc.ErrTooLong) {
		t.Fatalf("MaxValueLen lost by For: %v", err)
	}
}
