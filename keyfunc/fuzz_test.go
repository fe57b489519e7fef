package keyfunc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

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

// refValid is the rule for a value, from the documentation: valid UTF-8
// without control characters (C0, DEL, C1).
func refValid(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// refJSON is the reference of JSONBody.Lookup, from its documentation: the
// scalar at the dotted path of a JSON body (numbers as written, booleans as
// true/false, a decimal segment indexing an array), absent for a missing
// field or null, bad for a body that is not JSON or a field that is an
// object or an array; an empty or all-space body has no fields.
func refJSON(body []byte, path string) (v string, present, bad bool) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "", false, false
	}
	if !json.Valid(body) {
		return "", false, true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var cur any
	if err := dec.Decode(&cur); err != nil {
		return "", false, true
	}
	for _, seg := range strings.Split(path, ".") {
		switch x := cur.(type) {
		case map[string]any:
			cur = x[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return "", false, false
			}
			cur = x[i]
		default:
			return "", false, false
		}
	}
	switch x := cur.(type) {
	case nil:
		return "", false, false
	case string:
		return x, true, false
	case json.Number:
		return x.String(), true, false
	case bool:
		return strconv.FormatBool(x), true, false
	}
	return "", false, true
}

// httpBareOrder is the bare order keyfunc.HTTP documents: path, then query,
// form, body, header.
var httpBareOrder = []keyfunc.Source{keyfunc.SourcePath, keyfunc.SourceQuery, keyfunc.SourceForm, keyfunc.SourceBody, keyfunc.SourceHeader}

// FuzzRequestValues checks Key on request values as the HTTP adapters hand
// them over, against a reference written from the documentation: the
// template k:{v}:{body.<field>}, each placeholder untyped or typed (int,
// uint, uuid), {v} a bare name resolved in the HTTP bare order (path, query,
// form, body, header: the first non-empty value wins, a body that cannot
// be read stops the search) and the second part a field of a JSON body
// read through JSONBody. Invariants: no panic; the key is exactly the
// canonical values, encoded; every failure is a *Error naming the
// placeholder with the documented reason (ErrMissing, ErrInvalidValue,
// ErrTooLong), whose text never starts with the package name. FuzzKey
// covers arbitrary templates; this covers the sources behind them.
func FuzzRequestValues(f *testing.F) {
	// Seeds: types (v in the low 2 bits, body field in the next 2), path,
	// query, form, header values, body, body field.
	f.Add(uint8(0), "", "", "", "", []byte(`{"v": 7, "a": {"b": "x"}}`), "a.b")
	f.Add(uint8(1), "", "007", "", "", []byte(`{"a": {"b": "+1"}}`), "a.b")
	f.Add(uint8(1|1<<2), "", "", "", "", []byte(`{"v": 1e3, "n": -0}`), "n")
	f.Add(uint8(0), "", "", "", "h", []byte(`{"v":`), "v")
	f.Add(uint8(0), "p", "", "", "", []byte(`{"v": {}, "a": [1, {"b": true}]}`), "a.1.b")
	f.Add(uint8(2<<2), "", "", "f", "", []byte(`{"a": [10, 20]}`), "a.+1")
	f.Add(uint8(2|2<<2), "5", "", "", "", []byte(`{"a": [10, 20]}`), "a.-1")
	f.Add(uint8(3), "", "", "", "{6BA7B810-9DAD-11D1-80B4-00C04FD430C8}", []byte(` `), "u")
	f.Add(uint8(3<<2), "", "", "", "1", []byte(`{"u": "urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8"}`), "u")
	f.Add(uint8(0), "", "", "", "", []byte(`{"v": "\u0085", "c": "a\u0000b"}`), "c")
	f.Add(uint8(0), "", "", "", "", []byte(`{"v": 1, "v": 2, "s": "\ud800\udc00\ud800"}`), "s")
	f.Add(uint8(0), "", "", "", "", []byte("{\"v\": \"\xff\", \"n\": null}"), "n")
	f.Add(uint8(0), strings.Repeat(":", 256), "", "", "", []byte(`{"k": "`+strings.Repeat("%", 256)+`"}`), "k")
	f.Add(uint8(0), strings.Repeat("p", 257), "", "", "", []byte(`{}`), "k")
	f.Add(uint8(1), "", "", "", "", []byte(`[1] 2`), "0")
	f.Add(uint8(0), "", "", "", "", []byte(`{"a.b": 1}`), "a..b")
	f.Fuzz(func(t *testing.T, sel uint8, pathV, queryV, formV, headerV string, body []byte, field string) {
		types := []keyfunc.ValueType{keyfunc.TypeNone, keyfunc.TypeInt, keyfunc.TypeUint, keyfunc.TypeUUID}
		vPart, bPart := keyfunc.Any("v"), keyfunc.Body(field)
		vPart.Type, bPart.Type = types[sel&3], types[sel>>2&3]
		tmpl, err := keyfunc.JoinWith(":", []keyfunc.Part{keyfunc.Const("k"), vPart, bPart}, keyfunc.HTTP())
		if err != nil {
			if !errors.Is(err, keyfunc.ErrBadTemplate) {
				t.Fatalf("Join with field %q: %v, want ErrBadTemplate", field, err)
			}
			return
		}
		jb := keyfunc.NewJSONBody(body)
		lookup := func(src keyfunc.Source, name string) (string, bool, error) {
			switch src {
			case keyfunc.SourcePath:
				return pathV, pathV != "", nil
			case keyfunc.SourceQuery:
				return queryV, queryV != "", nil
			case keyfunc.SourceForm:
				return formV, formV != "", nil
			case keyfunc.SourceHeader:
				return headerV, headerV != "", nil
			case keyfunc.SourceBody:
				return jb.Lookup(name)
			}
			t.Fatalf("lookup of %s.%s: not a source of this template", src, name)
			return "", false, nil
		}

		// The reference: each part's value, or the part that fails and
		// the reasons it may give.
		var wantKey, wantPart string
		var reasons []error
		value := func(part string, typ keyfunc.ValueType, v string) (string, bool) {
			if typ != keyfunc.TypeNone {
				c, ok := canon(typ, v)
				if !ok {
					wantPart, reasons = part, []error{keyfunc.ErrInvalidValue}
					return "", false
				}
				v = c
			}
			if len(v) > keyfunc.DefaultMaxValueLen {
				reasons = append(reasons, keyfunc.ErrTooLong)
			}
			if !refValid(v) {
				reasons = append(reasons, keyfunc.ErrInvalidValue)
			}
			if len(reasons) > 0 {
				wantPart = part
				return "", false
			}
			return v, true
		}
		enc := strings.NewReplacer("%", "%25", ":", "%3A")
		func() {
			var v string
			found := false
			for _, src := range httpBareOrder {
				var s string
				switch src {
				case keyfunc.SourcePath:
					s = pathV
				case keyfunc.SourceQuery:
					s = queryV
				case keyfunc.SourceForm:
					s = formV
				case keyfunc.SourceHeader:
					s = headerV
				case keyfunc.SourceBody:
					var bad bool
					s, _, bad = refJSON(body, "v")
					if bad {
						wantPart, reasons = "v", []error{keyfunc.ErrInvalidValue}
						return
					}
				}
				if s != "" {
					v, found = s, true
					break
				}
			}
			if !found {
				wantPart, reasons = "v", []error{keyfunc.ErrMissing}
				return
			}
			cv, ok := value("v", vPart.Type, v)
			if !ok {
				return
			}
			bpart := "body." + field
			b, present, bad := refJSON(body, field)
			switch {
			case bad:
				wantPart, reasons = bpart, []error{keyfunc.ErrInvalidValue}
				return
			case !present || b == "":
				wantPart, reasons = bpart, []error{keyfunc.ErrMissing}
				return
			}
			cb, ok := value(bpart, bPart.Type, b)
			if !ok {
				return
			}
			wantKey = "k:" + enc.Replace(cv) + ":" + enc.Replace(cb)
			if len(wantKey) > keyfunc.MaxKeyLen {
				wantKey, wantPart, reasons = "", bpart, []error{keyfunc.ErrTooLong}
			}
		}()

		key, err := tmpl.Key(lookup)
		if err == nil {
			if wantPart != "" || key != wantKey {
				t.Fatalf("key %q, want %q or an error naming %q (%v)", key, wantKey, wantPart, reasons)
			}
			return
		}
		var ke *keyfunc.Error
		if !errors.As(err, &ke) || ke.Part != wantPart || !slices.ContainsFunc(reasons, func(r error) bool { return errors.Is(err, r) }) {
			t.Fatalf("Key: %v, want a *Error naming %q with one of %v (reference key %q)", err, wantPart, reasons, wantKey)
		}
		if strings.HasPrefix(err.Error(), "keyfunc:") {
			t.Fatalf("request error %q names the package", err)
		}
	})
}
