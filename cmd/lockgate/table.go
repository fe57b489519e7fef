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
	"github.com/lockgate/lockgate/internal/traceparent"
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

// cells are info's columns. A free lock shows "-" but for its waiters; a
// lock that readers hold shows "read (N)" and their longest TTL.
func cells(info core.LockInfo) []string {
	if info.Readers > 0 {
		return []string{printable(info.Key), fmt.Sprintf("read (%d)", info.Readers), duration(info.TTL), "-", "-", strconv.Itoa(info.Waiters), "-"}
	}
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
	if id, _, _, ok := traceparent.Parse(tag); ok {
		return id
	}
	return printable(tag)
}

// printable is s, or s quoted when it has characters that would break the
// table or the terminal (tabs, newlines, control or invalid bytes).
func printable(s string) string {
	if !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
