package keyfunc_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/keyfunc"
)

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
// values (so Key is injective), and that two different value sets never
// give the same key. The seed corpus runs in every go test.
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
		keyOf := func(vals []string) (string, bool) {
			m, lookup := byName(tmpl, vals)
			k, err := tmpl.Key(lookup)
			if err != nil {
				var ke *keyfunc.Error
				if !errors.As(err, &ke) || ke.Part == "" {
					t.Fatalf("Key: %v is not a *Error naming a part", err)
				}
				return "", false
			}
			if len(k) > keyfunc.MaxKeyLen {
				t.Fatalf("key of %d bytes", len(k))
			}
			got, ok := decode(tmpl, k)
			if !ok {
				t.Fatalf("key %q of %q does not decode", k, text)
			}
			j := 0
			for _, p := range tmpl.Parts() {
				if p.IsLiteral() {
					continue
				}
				if got[j] != m[p.Name] {
					t.Fatalf("key %q of %q: value %d decodes to %q, want %q", k, text, j, got[j], m[p.Name])
				}
				j++
			}
			return k, true
		}
		ka, okA := keyOf([]string{a1, a2, a3})
		kb, okB := keyOf([]string{b1, b2, b3})
		if okA && okB && ka == kb {
			ma, _ := byName(tmpl, []string{a1, a2, a3})
			mb, _ := byName(tmpl, []string{b1, b2, b3})
			for name, v := range ma {
				if mb[name] != v {
					t.Fatalf("collision: %q gives %q for %v and %v", text, ka, ma, mb)
				}
			}
		}
	})
}
