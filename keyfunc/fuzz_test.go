package keyfunc_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/lockgate/lockgate/keyfunc"
)

// canon is the reference for typed values, written from the specification
// rather than shared with the package: the value a handler parses, in its
// canonical spelling, and whether it parses.
func canon(typ keyfunc.ValueType, v string) (string, bool) {
	switch typ {
	case keyfunc.TypeInt:
		n, err := strconv.ParseInt(v, 10, 64)
		return strconv.FormatInt(n, 10), err == nil
	case keyfunc.TypeUint:
		n, err := strconv.ParseUint(strings.TrimPrefix(v, "+"), 10, 64)
		return strconv.FormatUint(n, 10), err == nil
	case keyfunc.TypeUUID:
		u, err := uuid.Parse(v)
		return u.String(), err == nil
	}
	return v, true
}

// byName assigns vals, cycling, to the distinct placeholder names of tmpl in
// order of appearance, and returns a Lookup over them that ignores the
// source.
func byName(tmpl *keyfunc.Template, vals []string) (map[string]string, keyfunc.Lookup) {
	m := map[string]string{}
	i := 0
	for _, p := range tmpl.Parts() {
		if p.IsLiteral() {
			continue
		}
		if _, ok := m[p.Name]; !ok {
			m[p.Name] = vals[i%len(vals)]
			i++
		}
	}
	return m, func(_ keyfunc.Source, name string) (string, bool, error) {
		v, ok := m[name]
		return v, ok, nil
	}
}

// decode splits key back into the values of tmpl's placeholders, in order,
// knowing only the template: the left inverse that makes Key injective.
func decode(tmpl *keyfunc.Template, key string) ([]string, bool) {
	parts := tmpl.Parts()
	var out []string
	rest := key
	for i, p := range parts {
		if p.IsLiteral() {
			if !strings.HasPrefix(rest, p.Name) {
				return nil, false
			}
			rest = rest[len(p.Name):]
			continue
		}
		var raw string
		switch {
		case i == len(parts)-1:
			raw, rest = rest, ""
		case i == len(parts)-2: // only the final literal follows
			tail := parts[i+1].Name
			if len(rest) < len(tail) {
				return nil, false
			}
			raw, rest = rest[:len(rest)-len(tail)], rest[len(rest)-len(tail):]
		default:
			stop := parts[i+1].Name[0]
			j := 0
			for j < len(rest) && rest[j] != stop {
				if rest[j] == '%' {
					j += 2
				}
				j++
			}
			if j > len(rest) {
				return nil, false
			}
			raw, rest = rest[:j], rest[j:]
		}
		v, ok := unescape(raw)
		if !ok {
			return nil, false
		}
		out = append(out, v)
	}
	return out, rest == ""
}

func unescape(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(n))
		i += 2
	}
	return b.String(), true
}

// FuzzKey checks, for any template and values, that nothing panics, that
// errors are *keyfunc.Error, that every key decodes back to exactly its
// values (for a typed placeholder, the canonical spelling of its value; so
// Key is injective), and that two value sets give the same key only when
// every placeholder has the same (canonical) value. The seed corpus runs in
// every go test.
func FuzzKey(f *testing.F) {
	f.Add("order:{query.user_id}:{path.voucher}", "a:b", "c", "x", "a", "b:c", "x")
	f.Add("order:{a}:{b}", "a%3Ab", "c", "", "a:b", "c", "")
	f.Add("{a}-{b}-{c}", "1-2", "3", "4", "1", "2-3", "4")
	f.Add("{a}x{b}", "ax", "b", "", "a", "xb", "")
	f.Add("{a}A{b}", "%41", "1", "", "A", "1", "")
	f.Add("k{body.a.b}:{ctx.u}{", "1", "2", "3", "1", "2", "3")
	f.Add("{a}}{b}", "1", "2", "3", "1", "2", "3")
	f.Add("p:{a}:{a}", "1", "2", "3", "2", "1", "3")
	f.Add("{x}—{y}", "é", "—", "", "—", "é", "")
	f.Add("only-literal", "1", "2", "3", "4", "5", "6")
	f.Add("{a}", strings.Repeat("z", 300), "", "", "\x00", "", "")
	f.Add("order:{query.user_id:int}:{path.voucher}", "01", "7", "", "+1", "7", "")
	f.Add("order:{query.user_id:int}:{path.voucher_id:uint}", "-0", "+007", "", "0", "7", "")
	f.Add("{a:int}-{b:int}-{c}", "-1", "-2", "-", "1", "2", "x")
	f.Add("t:{header.X-Tenant:uuid}:{u:int}", "6BA7B810-9DAD-11D1-80B4-00C04FD430C8", "1", "",
		"{6ba7b810-9dad-11d1-80b4-00c04fd430c8}", "001", "")
	f.Add("x{a:uint}x{a}x{a:int}", "+1", "", "", "1", "", "")
	f.Add("k:{a:float}", "1", "", "", "1", "", "")
	f.Add("k:{a:}:{query.b:c:int}", "1", "2", "", "1", "2", "")
	f.Fuzz(func(t *testing.T, text, a1, a2, a3, b1, b2, b3 string) {
		tmpl, err := keyfunc.Compile(text)
		if err != nil {
			var ke *keyfunc.Error
			if !errors.As(err, &ke) || !errors.Is(err, keyfunc.ErrBadTemplate) {
				t.Fatalf("Compile(%q): %v is not a *Error with ErrBadTemplate", text, err)
			}
			return
		}
		if again, err := keyfunc.Compile(tmpl.String()); err != nil || again.String() != text {
			t.Fatalf("recompiling %q: %v", text, err)
		}
		// keyOf returns the key of vals and the value each placeholder
		// should decode to, in order.
		keyOf := func(vals []string) (string, []string, bool) {
			m, lookup := byName(tmpl, vals)
			var want []string
			parses := true
			for _, p := range tmpl.Parts() {
				if !p.IsLiteral() {
					c, ok := canon(p.Type, m[p.Name])
					want = append(want, c)
					parses = parses && ok
				}
			}
			k, err := tmpl.Key(lookup)
			if err != nil {
				var ke *keyfunc.Error
				if !errors.As(err, &ke) || ke.Part == "" {
					t.Fatalf("Key: %v is not a *Error naming a part", err)
				}
				if strings.HasPrefix(err.Error(), "keyfunc:") {
					t.Fatalf("request error %q names the package", err)
				}
				return "", nil, false
			}
			if !parses {
				t.Fatalf("key %q of %q built from values %v that do not all parse", k, text, m)
			}
			if len(k) > keyfunc.MaxKeyLen {
				t.Fatalf("key of %d bytes", len(k))
			}
			got, ok := decode(tmpl, k)
			if !ok {
				t.Fatalf("key %q of %q does not decode", k, text)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("key %q of %q decodes to %q, want %q", k, text, got, want)
			}
			// The canonical values give the same key. Each is non-empty, so
			// Key looks each placeholder up once, in order.
			i := 0
			again, err := tmpl.Key(func(keyfunc.Source, string) (string, bool, error) {
				if i >= len(want) {
					t.Fatalf("more lookups than placeholders in %q", text)
				}
				i++
				return want[i-1], true, nil
			})
			if err != nil || again != k {
				t.Fatalf("canonical values %q of %q give %q, %v; want %q", want, text, again, err, k)
			}
			return k, want, true
		}
		ka, wa, okA := keyOf([]string{a1, a2, a3})
		kb, wb, okB := keyOf([]string{b1, b2, b3})
		if okA && okB && (ka == kb) != slices.Equal(wa, wb) {
			t.Fatalf("%q gives %q for %q and %q for %q", text, ka, wa, kb, wb)
		}
	})
}

// FuzzTyped checks typed placeholders against the reference canon: a value
// gives a key exactly when it parses, the key holds its canonical spelling,
// building from the canonical spelling gives the same key, and two values
// give the same key exactly when they parse to the same value.
func FuzzTyped(f *testing.F) {
	for _, s := range [][2]string{
		{"01", "1"}, {"001", "+1"}, {"-0", "0"}, {"+0", "-1"}, {"1.0", "1"}, {"0x1", " 1"},
		{"9223372036854775807", "9223372036854775808"}, {"18446744073709551615", "+18446744073709551616"},
		{"", "+"}, {"6ba7b810-9dad-11d1-80b4-00c04fd430c8", "urn:uuid:6BA7B810-9DAD-11D1-80B4-00C04FD430C8"},
		{"{6ba7b810-9dad-11d1-80b4-00c04fd430c8}", "6ba7b8109dad11d180b400c04fd430c8"}, {"x\x00", "\xff"},
	} {
		for typ := range 3 {
			f.Add(uint8(typ), s[0], s[1])
		}
	}
	f.Fuzz(func(t *testing.T, sel uint8, a, b string) {
		typ := []keyfunc.ValueType{keyfunc.TypeInt, keyfunc.TypeUint, keyfunc.TypeUUID}[sel%3]
		v := keyfunc.Query("v")
		v.Type = typ
		tmpl := keyfunc.MustJoin(keyfunc.Const("k"), v, keyfunc.Const("x"))
		if want := "k:{query.v:" + typ.String() + "}:x"; tmpl.String() != want {
			t.Fatalf("String = %q, want %q", tmpl.String(), want)
		}
		keyOf := func(v string) (string, bool) {
			k, err := tmpl.Key(values(map[string]string{"query.v": v}))
			c, parses := canon(typ, v)
			if err != nil {
				var ke *keyfunc.Error
				if !errors.As(err, &ke) || ke.Part != "query.v" {
					t.Fatalf("Key(%q): %v is not a *Error naming query.v", v, err)
				}
				switch {
				case v == "" && errors.Is(err, keyfunc.ErrMissing):
				case !parses && errors.Is(err, keyfunc.ErrInvalidValue):
				default:
					t.Fatalf("%s Key(%q): %v (parses %v)", typ, v, err, parses)
				}
				return "", false
			}
			if !parses {
				t.Fatalf("%s Key(%q) = %q for a value that does not parse", typ, v, k)
			}
			if want := "k:" + strings.ReplaceAll(strings.ReplaceAll(c, "%", "%25"), ":", "%3A") + ":x"; k != want {
				t.Fatalf("%s Key(%q) = %q, want %q", typ, v, k, want)
			}
			if again, err := tmpl.Key(values(map[string]string{"query.v": c})); err != nil || again != k {
				t.Fatalf("%s canonical %q gives %q, %v; want %q", typ, c, again, err, k)
			}
			return k, true
		}
		ka, okA := keyOf(a)
		kb, okB := keyOf(b)
		if okA && okB {
			ca, _ := canon(typ, a)
			cb, _ := canon(typ, b)
			if (ka == kb) != (ca == cb) {
				t.Fatalf("%s: %q gives %q and %q gives %q", typ, a, ka, b, kb)
			}
		}
	})
}
