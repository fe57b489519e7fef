package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lockgate/lockgate/core"
)

// columns are the table's header, one column per LockInfo field shown.
var columns = []string{"KEY", "HELD", "TTL", "FENCE", "AGE", "WAITERS", "TRACE"}

// table prints LockInfos as aligned columns. lead, when not empty, is
// written before every row (the header gets an empty cell there).
type table struct {
	tw   *tabwriter.Writer
	lead string
}

func newTable(w io.Writer, lead string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0), lead: lead}
	if lead != "" {
		fmt.Fprint(t.tw, "\t")
	}
	fmt.Fprintln(t.tw, strings.Join(columns, "\t"))
	return t
}

func (t *table) row(info core.LockInfo) {
	if t.lead != "" {
		fmt.Fprint(t.tw, t.lead, "\t")
	}
	fmt.Fprintln(t.tw, strings.Join(cells(info), "\t"))
}

// flush writes the table out; nothing appears before it.
func (t *table) flush() error { return t.tw.Flush() }

// cells are info's columns. A free lock shows "-" but for its waiters.
func cells(info core.LockInfo) []string {
	if !info.Held {
		return []string{printable(info.Key), "no", "-", "-", "-", strconv.Itoa(info.Waiters), "-"}
	}
	return []string{
		printable(info.Key),
		"yes",
		duration(info.TTL),
		strconv.FormatInt(info.Fence, 10),
		duration(info.Age),
		strconv.Itoa(info.Waiters),
		trace(info.HolderTag),
	}
}

// duration rounds d for reading: to the millisecond under a minute, else
// to the second.
func duration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// trace is the TRACE column for a holder tag: the trace id of a W3C
// traceparent (version-traceid-spanid-flags, lowercase hex), else the tag
// itself, "-" when there is none.
func trace(tag string) string {
	if tag == "" {
		return "-"
	}
	if id, ok := traceID(tag); ok {
		return id
	}
	return printable(tag)
}

// traceID returns the trace id of a W3C traceparent
// "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>". A later version
// (not ff) may append fields after another '-'. An all-zero trace or span
// id is invalid.
func traceID(s string) (string, bool) {
	const n = 55 // 2+1+32+1+16+1+2
	if len(s) < n || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return "", false
	}
	version, id, span, flags := s[:2], s[3:35], s[36:52], s[53:55]
	switch {
	case !isHex(version) || version == "ff" || !isHex(id) || !isHex(span) || !isHex(flags):
		return "", false
	case allZero(id) || allZero(span):
		return "", false
	case version == "00" && len(s) != n:
		return "", false
	case len(s) > n && s[n] != '-':
		return "", false
	}
	return id, true
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

// printable is s, or s quoted when it has characters that would break the
// table or the terminal (tabs, newlines, control or invalid bytes).
func printable(s string) string {
	if !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
