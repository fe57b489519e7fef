package keyfunc

import (
	"errors"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

const hexDigits = "0123456789ABCDEF"

// encode appends v with every byte of t.escape written as %XX.
func (t *Template) encode(b *strings.Builder, v string) {
	start := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !t.escape[c] {
			continue
		}
		b.WriteString(v[start:i])
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
		start = i + 1
	}
	b.WriteString(v[start:])
}

// validText reports whether s is valid UTF-8 without control characters
// (C0, DEL, C1).
func validText(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		if unicode.IsControl(r) {
			return false
		}
		i += n
	}
	return true
}

func itoa(n int) string { return strconv.Itoa(n) }

func asError(err error, target **Error) bool { return errors.As(err, target) }
