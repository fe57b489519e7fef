// Package traceparent reads a W3C traceparent, as the otel module's holder
// tags carry it and cmd/lockgate shows it: one reading for both, so that
// they agree on what a tag is.
package traceparent

import "strings"

// Len is the length of a version 00 traceparent:
// "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>".
const Len = 55

// Parse returns the trace id, span id and flags (lowercase hex) of s. A
// later version (not ff) may append fields after another '-'; version 00
// is exactly Len bytes. An all-zero trace or span id is invalid.
func Parse(s string) (traceID, spanID, flags string, ok bool) {
	if len(s) < Len || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return "", "", "", false
	}
	version, id, span, fl := s[:2], s[3:35], s[36:52], s[53:55]
	switch {
	case !isHex(version) || version == "ff" || !isHex(id) || !isHex(span) || !isHex(fl):
		return "", "", "", false
	case allZero(id) || allZero(span):
		return "", "", "", false
	case version == "00" && len(s) != Len:
		return "", "", "", false
	case len(s) > Len && s[Len] != '-':
		return "", "", "", false
	}
	return id, span, fl, true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool { return strings.Trim(s, "0") == "" }
