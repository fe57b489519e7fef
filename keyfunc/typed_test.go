package keyfunc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/keyfunc"
)

func TestTypedValues(t *testing.T) {
	const u = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	cases := []struct {
		name, text, value string
		want              string // key; "" with detail for an error
		detail            string
	}{
		// int: what strconv.ParseInt(v, 10, 64) accepts, canonicalised.
		{"int canonical", "k:{query.v:int}", "42", "k:42", ""},
		{"int leading zero", "k:{query.v:int}", "042", "k:42", ""},
		{"int plus", "k:{query.v:int}", "+42", "k:42", ""},
		{"int plus zeros", "k:{query.v:int}", "+0042", "k:42", ""},
		{"int zero", "k:{query.v:int}", "0", "k:0", ""},
		{"int zeros", "k:{query.v:int}", "000", "k:0", ""},
		{"int minus zero", "k:{query.v:int}", "-0", "k:0", ""},
		{"int plus zero", "k:{query.v:int}", "+0", "k:0", ""},
		{"int negative", "k:{query.v:int}", "-7", "k:-7", ""},
		{"int negative zeros", "k:{query.v:int}", "-007", "k:-7", ""},
		{"int max", "k:{query.v:int}", "9223372036854775807", "k:9223372036854775807", ""},
		{"int min", "k:{query.v:int}", "-9223372036854775808", "k:-9223372036854775808", ""},
		{"int many zeros", "k:{query.v:int}", strings.Repeat("0", 400) + "7", "k:7", ""},
		{"int overflow", "k:{query.v:int}", "9223372036854775808", "", "not an integer in the int64 range"},
		{"int underflow", "k:{query.v:int}", "-9223372036854775809", "", "not an integer in the int64 range"},
		{"int space", "k:{query.v:int}", " 1", "", "not an integer"},
		{"int trailing space", "k:{query.v:int}", "1 ", "", "not an integer"},
		{"int decimal", "k:{query.v:int}", "1.0", "", "not an integer"},
		{"int hex", "k:{query.v:int}", "0x1", "", "not an integer"},
		{"int underscore", "k:{query.v:int}", "1_000", "", "not an integer"},
		{"int exponent", "k:{query.v:int}", "1e3", "", "not an integer"},
		{"int sign only", "k:{query.v:int}", "-", "", "not an integer"},
		{"int double sign", "k:{query.v:int}", "+-1", "", "not an integer"},
		{"int word", "k:{query.v:int}", "one", "", "not an integer"},
		{"int control", "k:{query.v:int}", "1\n", "", "not an integer"},
		{"int fullwidth digit", "k:{query.v:int}", "１", "", "not an integer"},
		// uint: non-negative, optional '+', leading zeros.
		{"uint canonical", "k:{path.v:uint}", "7", "k:7", ""},
		{"uint zeros", "k:{path.v:uint}", "007", "k:7", ""},
		{"uint plus", "k:{path.v:uint}", "+7", "k:7", ""},
		{"uint zero", "k:{path.v:uint}", "0", "k:0", ""},
		{"uint max", "k:{path.v:uint}", "18446744073709551615", "k:18446744073709551615", ""},
		{"uint overflow", "k:{path.v:uint}", "18446744073709551616", "", "not a non-negative integer in the uint64 range"},
		{"uint minus zero", "k:{path.v:uint}", "-0", "", "not a non-negative integer"},
		{"uint negative", "k:{path.v:uint}", "-1", "", "not a non-negative integer"},
		{"uint plus only", "k:{path.v:uint}", "+", "", "not a non-negative integer"},
		{"uint double plus", "k:{path.v:uint}", "++1", "", "not a non-negative integer"},
		{"uint decimal", "k:{path.v:uint}", "1.5", "", "not a non-negative integer"},
		// uuid: what uuid.Parse accepts, lower-case hyphenated.
		{"uuid canonical", "k:{header.X-Tenant:uuid}", u, "k:" + u, ""},
		{"uuid upper", "k:{header.X-Tenant:uuid}", strings.ToUpper(u), "k:" + u, ""},
		{"uuid urn", "k:{header.X-Tenant:uuid}", "urn:uuid:" + u, "k:" + u, ""},
		{"uuid urn upper", "k:{header.X-Tenant:uuid}", "URN:UUID:" + strings.ToUpper(u), "k:" + u, ""},
		{"uuid braces", "k:{header.X-Tenant:uuid}", "{" + u + "}", "k:" + u, ""},
		{"uuid hex", "k:{header.X-Tenant:uuid}", strings.ReplaceAll(u, "-", ""), "k:" + u, ""},
		{"uuid short", "k:{header.X-Tenant:uuid}", u[:35], "", "not a UUID"},
		{"uuid bad hex", "k:{header.X-Tenant:uuid}", "g" + u[1:], "", "not a UUID"},
		{"uuid misplaced hyphen", "k:{header.X-Tenant:uuid}", "6ba7b81-09dad-11d1-80b4-00c04fd430c8", "", "not a UUID"},
		{"uuid bad urn", "k:{header.X-Tenant:uuid}", "urn:uuix:" + u, "", "not a UUID"},
		{"uuid word", "k:{header.X-Tenant:uuid}", "tenant", "", "not a UUID"},
		// other sources and bare names
		{"field int", "k:{field.order.id:int}", "+5", "k:5", ""},
		{"bare int", "k:{user_id:int}", "05", "k:5", ""},
		// canonical values are encoded like any other
		{"negative before '-'", "k:{query.v:int}-x", "-5", "k:%2D5-x", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl := keyfunc.MustCompile(c.text)
			var part keyfunc.Part
			for _, p := range tmpl.Parts() {
				if !p.IsLiteral() {
					part = p
				}
			}
			got, err := tmpl.Key(func(keyfunc.Source, string) (string, bool, error) { return c.value, true, nil })
			if c.detail == "" {
				if err != nil || got != c.want {
					t.Fatalf("Key(%q) = %q, %v; want %q", c.value, got, err, c.want)
				}
				return
			}
			var ke *keyfunc.Error
			if !errors.As(err, &ke) || !errors.Is(err, keyfunc.ErrInvalidValue) {
				t.Fatalf("Key(%q) = %q, %v; want *Error with ErrInvalidValue", c.value, got, err)
			}
			if got != "" {
				t.Errorf("key %q returned with an error", got)
			}
			if ke.Part != part.String() || ke.Detail != c.detail {
				t.Errorf("part %q detail %q, want %q and %q", ke.Part, ke.Detail, part.String(), c.detail)
			}
			if want := part.String() + ": invalid value: " + c.detail; err.Error() != want {
				t.Errorf("text %q, want %q", err.Error(), want)
			}
		})
	}
}

// TestTypedOneKey is the bypass: one user spelled several ways must get one
// lock.
func TestTypedOneKey(t *testing.T) {
	tmpl := keyfunc.MustCompile("order:{query.user_id:int}", keyfunc.HTTP())
	for _, spelling := range []string{"01", "001", "+1", "1", "+001", strings.Repeat("0", 300) + "1"} {
		t.Run(spelling[max(0, len(spelling)-4):], func(t *testing.T) {
			got, err := tmpl.Key(values(map[string]string{"query.user_id": spelling}))
			if err != nil || got != "order:1" {
				t.Fatalf("Key(%q) = %q, %v; want order:1", spelling, got, err)
			}
		})
	}
	two := keyfunc.MustCompile("order:{query.user_id:int}:{path.voucher_id:uint}")
	a, errA := two.Key(values(map[string]string{"query.user_id": "+01", "path.voucher_id": "007"}))
	b, errB := two.Key(values(map[string]string{"query.user_id": "1", "path.voucher_id": "+7"}))
	if errA != nil || errB != nil || a != b || a != "order:1:7" {
		t.Fatalf("keys %q (%v) and %q (%v), want both order:1:7", a, errA, b, errB)
	}
}

func TestTypedMissingAndLimits(t *testing.T) {
	tmpl := keyfunc.MustCompile("k:{query.v:int}")
	for name, vals := range map[string]map[string]string{"absent": {}, "empty": {"query.v": ""}} {
		t.Run(name, func(t *testing.T) {
			_, err := tmpl.Key(values(vals))
			var ke *keyfunc.Error
			if !errors.As(err, &ke) || !errors.Is(err, keyfunc.ErrMissing) || ke.Part != "query.v" {
				t.Fatalf("err = %v, want ErrMissing naming query.v", err)
			}
		})
	}
	// The limit applies to the canonical value.
	short := keyfunc.MustCompile("k:{query.v:int}", keyfunc.MaxValueLen(2))
	if got, err := short.Key(values(map[string]string{"query.v": "+0000012"})); err != nil || got != "k:12" {
		t.Fatalf("long spelling of a short value: %q, %v", got, err)
	}
	if _, err := short.Key(values(map[string]string{"query.v": "123"})); !errors.Is(err, keyfunc.ErrTooLong) {
		t.Fatalf("canonical value over the limit: %v, want ErrTooLong", err)
	}
}

func TestTypedBare(t *testing.T) {
	tmpl := keyfunc.MustCompile("k:{id:int}", keyfunc.HTTP())
	cases := []struct {
		name   string
		vals   map[string]string
		want   string
		reason error
	}{
		{"path", map[string]string{"path.id": "07", "query.id": "8"}, "k:7", nil},
		{"empty path falls through", map[string]string{"path.id": "", "query.id": "+8"}, "k:8", nil},
		{"invalid does not fall through", map[string]string{"path.id": "x", "query.id": "8"}, "", keyfunc.ErrInvalidValue},
		{"none", map[string]string{}, "", keyfunc.ErrMissing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := tmpl.Key(values(c.vals))
			if c.reason == nil {
				if err != nil || got != c.want {
					t.Fatalf("Key = %q, %v; want %q", got, err, c.want)
				}
				return
			}
			var ke *keyfunc.Error
			if !errors.As(err, &ke) || !errors.Is(err, c.reason) || ke.Part != "id" {
				t.Fatalf("Key = %q, %v; want %v naming id", got, err, c.reason)
			}
		})
	}
}

func TestTypedCompile(t *testing.T) {
	cases := []struct {
		text string
		part keyfunc.Part
	}{
		{"k:{query.user_id:int}", keyfunc.Part{Source: keyfunc.SourceQuery, Name: "user_id", Type: keyfunc.TypeInt}},
		{"k:{path.id:uint}", keyfunc.Part{Source: keyfunc.SourcePath, Name: "id", Type: keyfunc.TypeUint}},
		{"k:{header.X-Tenant:uuid}", keyfunc.Part{Source: keyfunc.SourceHeader, Name: "X-Tenant", Type: keyfunc.TypeUUID}},
		{"k:{field.order.id:int}", keyfunc.Part{Source: keyfunc.SourceField, Name: "order.id", Type: keyfunc.TypeInt}},
		{"k:{body.user.id:uint}", keyfunc.Part{Source: keyfunc.SourceBody, Name: "user.id", Type: keyfunc.TypeUint}},
		{"k:{user_id:int}", keyfunc.Part{Source: keyfunc.SourceAuto, Name: "user_id", Type: keyfunc.TypeInt}},
		{"k:{query.user_id}", keyfunc.Part{Source: keyfunc.SourceQuery, Name: "user_id", Type: keyfunc.TypeNone}},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			tmpl, err := keyfunc.Compile(c.text)
			if err != nil {
				t.Fatal(err)
			}
			parts := tmpl.Parts()
			if len(parts) != 2 || parts[1] != c.part || parts[0].Type != keyfunc.TypeNone {
				t.Fatalf("Parts = %+v, want [k: %+v]", parts, c.part)
			}
			// Part.String names the field as written, without the type.
			if want := strings.SplitN(c.text[3:len(c.text)-1], ":", 2)[0]; parts[1].String() != want {
				t.Errorf("Part.String = %q, want %q", parts[1].String(), want)
			}
			again, err := keyfunc.Compile(tmpl.String())
			if err != nil || again.String() != c.text || again.Parts()[1] != c.part {
				t.Fatalf("round trip of %q: %v, %v", c.text, again, err)
			}
		})
	}
}

func TestTypedCompileErrors(t *testing.T) {
	cases := []struct {
		name, text, detail string
	}{
		{"unknown type", "k:{query.x:float}", `unknown type "float" in {query.x:float}`},
		{"empty type", "k:{query.x:}", "empty type in {query.x:}"},
		{"type case", "k:{query.x:INT}", `unknown type "INT"`},
		{"none is not a type", "k:{query.x:none}", `unknown type "none"`},
		{"bare unknown type", "k:{x:string}", `unknown type "string"`},
		{"colon in name", "k:{query.a:b:int}", "':' in placeholder name"},
		{"colon in bare name", "k:{a:b:int}", "':' in placeholder name"},
		{"empty name", "k:{query.:int}", "empty name in {query.:int}"},
		{"empty bare name", "k:{:int}", "empty name in {:int}"},
		{"only colon", "k:{:}", "empty type"},
		{"unknown source", "k:{usr.id:int}", `unknown source "usr" in {usr.id:int}`},
		{"dotted bare", "k:{a.b:int}", `unknown source "a"`},
		{"adjacent", "k:{query.a:int}{query.b:int}", "separated by literal text before {query.b:int}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := keyfunc.Compile(c.text)
			var ke *keyfunc.Error
			if !errors.As(err, &ke) || !errors.Is(err, keyfunc.ErrBadTemplate) {
				t.Fatalf("Compile(%q): %v, want ErrBadTemplate", c.text, err)
			}
			if !strings.Contains(ke.Detail, c.detail) {
				t.Errorf("detail %q, want it to contain %q", ke.Detail, c.detail)
			}
			if !strings.HasPrefix(err.Error(), "keyfunc: ") {
				t.Errorf("setup error %q lacks the keyfunc: prefix", err)
			}
		})
	}
}

func TestTypedBuilders(t *testing.T) {
	built := keyfunc.MustJoin(keyfunc.Const("order"), keyfunc.Query("user_id").Int(), keyfunc.Path("voucher_id").Uint(),
		keyfunc.Header("X-Tenant").UUID(), keyfunc.Any("n").Int(), keyfunc.Body("a.b"))
	const text = "order:{query.user_id:int}:{path.voucher_id:uint}:{header.X-Tenant:uuid}:{n:int}:{body.a.b}"
	if built.String() != text {
		t.Fatalf("String = %q, want %q", built.String(), text)
	}
	compiled := keyfunc.MustCompile(text)
	if len(built.Parts()) != len(compiled.Parts()) {
		t.Fatalf("Parts %+v, want %+v", built.Parts(), compiled.Parts())
	}
	for i, p := range compiled.Parts() {
		if built.Parts()[i] != p {
			t.Fatalf("part %d: %+v, want %+v", i, built.Parts()[i], p)
		}
	}
	vals := values(map[string]string{
		"query.user_id": "+042", "path.voucher_id": "007", "header.X-Tenant": "{6BA7B810-9DAD-11D1-80B4-00C04FD430C8}",
		"path.n": "-0", "body.a.b": "x",
	})
	k1, err1 := built.Key(vals)
	k2, err2 := compiled.Key(vals)
	if want := "order:42:7:6ba7b810-9dad-11d1-80b4-00c04fd430c8:0:x"; err1 != nil || err2 != nil || k1 != want || k2 != want {
		t.Fatalf("keys %q (%v), %q (%v); want %q", k1, err1, k2, err2, want)
	}
	if p := keyfunc.Query("user_id").Int(); p.String() != "query.user_id" || p.Type != keyfunc.TypeInt {
		t.Fatalf("Query(user_id).Int() = %+v (%q)", p, p.String())
	}
	bad := map[string][]keyfunc.Part{
		"typed const":   {keyfunc.Const("order").Int(), keyfunc.Query("id")},
		"typed sep":     {keyfunc.Query("id"), keyfunc.Const(":").UUID(), keyfunc.Query("x")},
		"unknown type":  {keyfunc.Const("order"), {Source: keyfunc.SourceQuery, Name: "id", Type: keyfunc.TypeUUID + 1}},
		"colon in name": {keyfunc.Const("order"), keyfunc.Query("a:int")},
	}
	for name, parts := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := keyfunc.Join(parts...); !errors.Is(err, keyfunc.ErrBadTemplate) {
				t.Fatalf("Join: %v, want ErrBadTemplate", err)
			}
		})
	}
}

func TestValueTypeString(t *testing.T) {
	for typ, want := range map[keyfunc.ValueType]string{
		keyfunc.TypeNone: "none", keyfunc.TypeInt: "int", keyfunc.TypeUint: "uint", keyfunc.TypeUUID: "uuid", 9: "type(9)",
	} {
		if typ.String() != want {
			t.Errorf("%d.String() = %q, want %q", typ, typ.String(), want)
		}
	}
}

// TestErrorText pins the texts adapters send in 400 answers: request errors
// carry no package name, setup errors do.
func TestErrorText(t *testing.T) {
	tmpl := keyfunc.MustCompile("order:{query.user_id:int}:{path.voucher}", keyfunc.MaxValueLen(4))
	lookup := func(m map[string]string) keyfunc.Lookup { return values(m) }
	keyErr := func(l keyfunc.Lookup) error { _, err := tmpl.Key(l); return err }
	_, bodyErr := keyfunc.ReadBody(strings.NewReader("12345"), 4)
	_, badErr := keyfunc.Compile("order:{usr.id}")
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"missing", keyErr(lookup(map[string]string{"path.voucher": "7"})), "query.user_id: missing or empty value"},
		{"invalid", keyErr(lookup(map[string]string{"query.user_id": "secret-1.0", "path.voucher": "7"})), "query.user_id: invalid value: not an integer"},
		{"control", keyErr(lookup(map[string]string{"query.user_id": "1", "path.voucher": "\x00"})), "path.voucher: invalid value: control character or invalid UTF-8"},
		{"too long", keyErr(lookup(map[string]string{"query.user_id": "1", "path.voucher": "12345"})), "path.voucher: value too long: over 4 bytes"},
		{"lookup", keyErr(func(keyfunc.Source, string) (string, bool, error) { return "", false, errors.New("boom") }), "query.user_id: boom"},
		{"body too large", bodyErr, "body: request body too large: over 4 bytes"},
		{"bad template", badErr, `keyfunc: order:{usr.id}: bad key template: unknown source "usr" in {usr.id}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.err == nil || c.err.Error() != c.want {
				t.Fatalf("text %v, want %q", c.err, c.want)
			}
			if strings.Contains(c.err.Error(), "secret") {
				t.Fatalf("text %q holds the value", c.err)
			}
		})
	}
	if got := (&keyfunc.Error{Part: "x"}).Error(); got != "x: error" {
		t.Fatalf("nil reason: %q", got)
	}
}
