package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Limits of the RESP reader, as Redis's own defaults.
const (
	respMaxLine  = 64 << 10  // longest line: inline command, simple string, error, number, header
	respMaxBulk  = 512 << 20 // longest bulk string (proto-max-bulk-len)
	respMaxDepth = 64        // deepest nesting of aggregates
)

// errProtocol reports bytes that are not RESP the proxy understands.
var errProtocol = errors.New("redistest: RESP protocol error")

// respReader reads RESP frames, keeping each frame's raw bytes so that the
// proxy forwards exactly what it received.
type respReader struct {
	r   *bufio.Reader
	raw []byte // the bytes of the frame being read
}

func newRespReader(r io.Reader) *respReader {
	return &respReader{r: bufio.NewReaderSize(r, 32<<10)}
}

// readCommand reads one request: a RESP array of bulk strings, or an inline
// command (a line of space-separated words; quotes are not interpreted, the
// words serve matching only). It returns the command's words, name first,
// and its raw bytes, valid until the next call. Like
// Redis, it accepts empty requests (a blank line, *0), which have no words
// and get no reply.
func (rr *respReader) readCommand() (args []string, raw []byte, err error) {
	rr.raw = rr.raw[:0]
	first, err := rr.r.Peek(1)
	if err != nil {
		return nil, nil, err
	}
	if first[0] != '*' {
		line, err := rr.line()
		if err != nil {
			return nil, nil, err
		}
		return strings.Fields(string(bytes.TrimSuffix(line, []byte("\r")))), rr.raw, nil
	}
	n, err := rr.header()
	if err != nil {
		return nil, nil, err
	}
	for i := 0; i < n; i++ {
		t, size, err := rr.typedHeader()
		if err != nil {
			return nil, nil, err
		}
		if t != '$' || size < 0 {
			return nil, nil, fmt.Errorf("%w: request element of type %q", errProtocol, t)
		}
		data, err := rr.bulk(size)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, string(data))
	}
	return args, rr.raw, nil
}

// readReply reads one reply with the attributes (|) that precede it. It
// returns the raw bytes, owned by the caller, and whether the reply is an
// out-of-band RESP3 push (>).
func (rr *respReader) readReply() (raw []byte, push bool, err error) {
	rr.raw = nil
	t, err := rr.value(0)
	return rr.raw, t == '>', err
}

// chunk returns the bytes available now (at least one), for connections
// that are passed through without parsing.
func (rr *respReader) chunk() ([]byte, error) {
	if _, err := rr.r.Peek(1); err != nil {
		return nil, err
	}
	b := make([]byte, rr.r.Buffered())
	_, err := io.ReadFull(rr.r, b)
	return b, err
}

// value reads one RESP2 or RESP3 value and returns its type byte.
// Attributes are read as part of the value they precede.
func (rr *respReader) value(depth int) (byte, error) {
	if depth > respMaxDepth {
		return 0, fmt.Errorf("%w: nested deeper than %d", errProtocol, respMaxDepth)
	}
	for {
		t, n, err := rr.typedHeader()
		if err != nil {
			return 0, err
		}
		switch t {
		case '+', '-', ':', '_', ',', '#', '(':
			return t, nil
		case '$', '!', '=': // bulk string, bulk error, verbatim string; $-1 is RESP2's null
			if n < 0 {
				return t, nil
			}
			_, err := rr.bulk(n)
			return t, err
		case '*', '~', '>', '%', '|': // array (*-1 is RESP2's null), set, push, map, attribute
			if t == '%' || t == '|' {
				n *= 2
			}
			for i := 0; i < n; i++ {
				if _, err := rr.value(depth + 1); err != nil {
					return 0, err
				}
			}
			if t != '|' {
				return t, nil
			}
			// An attribute precedes the value it describes: read that too.
		default:
			return 0, fmt.Errorf("%w: unknown type %q", errProtocol, t)
		}
	}
}

// typedHeader reads a line and returns its type byte and, for the types
// that carry one, its length (-1 for RESP2 nulls).
func (rr *respReader) typedHeader() (byte, int, error) {
	line, err := rr.line()
	if err != nil {
		return 0, 0, err
	}
	if len(line) < 2 || line[len(line)-1] != '\r' {
		return 0, 0, fmt.Errorf("%w: bad line %q", errProtocol, line)
	}
	t, body := line[0], line[1:len(line)-1]
	switch t {
	case '$', '!', '=', '*', '~', '>', '%', '|':
	default:
		return t, 0, nil
	}
	n, err := strconv.Atoi(string(body))
	if err != nil || n < -1 || n > respMaxBulk || (n == -1 && t != '$' && t != '*') {
		return 0, 0, fmt.Errorf("%w: bad length in %q", errProtocol, line)
	}
	return t, n, nil
}

// header reads the *N line of a request and returns N (0 for *0 and *-1,
// which Redis ignores).
func (rr *respReader) header() (int, error) {
	t, n, err := rr.typedHeader()
	if err != nil {
		return 0, err
	}
	if t != '*' {
		return 0, fmt.Errorf("%w: request of type %q", errProtocol, t)
	}
	return max(n, 0), nil
}

// line reads up to and including '\n' into raw and returns the line
// without the '\n' (with a '\r' if it had one), a slice of raw valid until
// raw grows.
func (rr *respReader) line() ([]byte, error) {
	start := len(rr.raw)
	for {
		part, err := rr.r.ReadSlice('\n')
		rr.raw = append(rr.raw, part...)
		if len(rr.raw)-start > respMaxLine {
			return nil, fmt.Errorf("%w: line longer than %d bytes", errProtocol, respMaxLine)
		}
		switch {
		case err == nil:
			return rr.raw[start : len(rr.raw)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(rr.raw) > start:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// bulk reads n bytes and the CRLF after them into raw and returns the n
// bytes, a slice of raw valid until raw grows.
func (rr *respReader) bulk(n int) ([]byte, error) {
	start := len(rr.raw)
	for remaining := n + 2; remaining > 0; {
		step := min(remaining, 64<<10) // grow as the data arrives, not by the length claimed
		at := len(rr.raw)
		rr.raw = slices.Grow(rr.raw, step)[:at+step]
		if _, err := io.ReadFull(rr.r, rr.raw[at:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		remaining -= step
	}
	if !bytes.HasSuffix(rr.raw, []byte("\r\n")) {
		return nil, fmt.Errorf("%w: bulk string not ended by CRLF", errProtocol)
	}
	return rr.raw[start : start+n], nil
}
