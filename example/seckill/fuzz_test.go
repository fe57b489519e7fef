package seckill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/redistest"
)

// fuzzStock is the stock of testVoucher in the fuzz targets: never out.
const fuzzStock = 1 << 40

// orderWorld is what one fuzz target runs against, built once per target
// (per fuzzing process): a real Redis, a Locker, a SQLite store in a temp
// dir with testVoucher seeded, and the LockRedis Config of the two fuzzed
// stacks, Fiber v2 and net/http (the other stacks call the same
// checkOrder behind parsers of their own, not fuzzed here).
type orderWorld struct {
	rc  *redis.Client
	st  *Store
	cfg Config
}

func newOrderWorld(f *testing.F) *orderWorld {
	f.Helper()
	srv := redistest.Start(f)
	rc := srv.Client(f)
	st, err := Open(context.Background(), filepath.Join(f.TempDir(), "seckill.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	if err := st.Seed(context.Background(), testVoucher, fuzzStock); err != nil {
		f.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	locker, err := core.New(client)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { locker.Close(); client.Close() })
	return &orderWorld{rc: rc, st: st, cfg: Config{
		Service: &Service{Store: st}, Mode: LockRedis, Locker: locker,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}}
}

// snapshot is the written state: the last order id and the stock.
type snapshot struct{ lastOrder, stock int64 }

func (w *orderWorld) snapshot(t *testing.T) snapshot {
	t.Helper()
	var s snapshot
	err := w.st.DB().QueryRowContext(context.Background(),
		`SELECT (SELECT COALESCE(MAX(id), 0) FROM orders), (SELECT stock FROM vouchers WHERE id = ?)`, testVoucher).Scan(&s.lastOrder, &s.stock)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// redisKeys lists every key in Redis, then empties it, so that each
// iteration looks at its own keys only (and stays cheap).
func (w *orderWorld) redisKeys(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	keys, err := w.rc.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.rc.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// fuzzRequest is one order request of the fuzz targets.
type fuzzRequest struct {
	voucher, user, extra string
	hname, hvalue        string
	body                 []byte
}

// validID is parseID's success, the reference of "a canonical positive
// id": what strconv.ParseInt reads as a positive int64.
func validID(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

// isToken reports whether s is a valid header name (RFC 9110 token).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// framing names the headers that decide how a request is delimited or
// answered at the HTTP layer (tested on their own in cmd/seckill's
// TestAmbiguousFraming); the fuzzed header is renamed rather than let
// them cut the request in two.
var framing = map[string]bool{"Content-Length": true, "Transfer-Encoding": true, "Host": true, "Expect": true, "Trailer": true, "Connection": true, "Upgrade": true}

// httpRequest builds the request: the voucher id escaped into the path
// (so it stays one segment), the query "user_id=<user escaped>&<extra>"
// (or extra alone when user is empty: then the query is the fuzzer's own,
// only made legal in a request line), one header, the body.
func (r fuzzRequest) httpRequest() (*http.Request, bool) {
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(r.body))
	q := legalQuery(r.extra)
	if r.user != "" {
		q = "user_id=" + url.QueryEscape(r.user)
		if r.extra != "" {
			q += "&" + legalQuery(r.extra)
		}
	}
	req.URL = &url.URL{Path: "/voucher-order/seckill/" + r.voucher, RawPath: "/voucher-order/seckill/" + url.PathEscape(r.voucher), RawQuery: q}
	req.RequestURI = req.URL.RequestURI()
	badHeader := false
	if name := textproto.CanonicalMIMEHeaderKey(r.hname); isToken(r.hname) {
		if framing[name] {
			name = "X-" + name
		}
		req.Header.Set(name, r.hvalue)
		for i := 0; i < len(r.hvalue); i++ {
			if c := r.hvalue[i]; (c < ' ' && c != '\t') || c == 0x7f {
				badHeader = true
			}
		}
	}
	return req, badHeader
}

// legalQuery percent-encodes the bytes a request line cannot carry raw
// (controls, space, '#', non-ASCII) and keeps the rest as the fuzzer
// wrote it: '&', '=', ';', '+' and malformed escapes such as "%zz".
func legalQuery(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '#' {
			b.WriteString("%" + strings.ToUpper(strconv.FormatUint(uint64(c)|0x100, 16)[1:]))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// lenient decodes %XX where valid and '+' as a space, keeping the rest
// (fasthttp's reading of a query).
func lenient(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s):
			if n, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 2
				continue
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// userCandidates are the user ids a parser of the query could read: the
// values of every user_id pair, raw, strictly and leniently decoded.
func userCandidates(q string) map[int64]bool {
	out := map[int64]bool{}
	for _, pair := range strings.FieldsFunc(q, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, _ := strings.Cut(pair, "=")
		keys := []string{k, lenient(k)}
		if uk, err := url.QueryUnescape(k); err == nil {
			keys = append(keys, uk)
		}
		match := false
		for _, kk := range keys {
			match = match || kk == "user_id"
		}
		if !match {
			continue
		}
		vals := []string{v, lenient(v)}
		if uv, err := url.QueryUnescape(v); err == nil {
			vals = append(vals, uv)
		}
		for _, vv := range vals {
			if n, ok := validID(vv); ok {
				out[n] = true
			}
		}
	}
	return out
}

// checkOrder checks one answer against the invariants. voucherView is the
// voucher id as the stack hands it to the handler (Fiber: the path
// segment as sent, escaped; net/http: decoded).
func (w *orderWorld) checkOrder(t *testing.T, stack string, r fuzzRequest, voucherView string, badHeader bool,
	before snapshot, ordersBefore int64, code int, body []byte) {
	t.Helper()
	after := w.snapshot(t)
	keys := w.redisKeys(t)
	var held []string
	for _, k := range keys {
		if strings.HasPrefix(k, core.DefaultPrefix+"{order:") && strings.HasSuffix(k, "}") {
			held = append(held, k)
		}
	}
	if len(held) > 0 {
		t.Fatalf("%s %d: locks left held: %v", stack, code, held)
	}
	var reply struct {
		Error   string `json:"error"`
		OrderID int64  `json:"order_id"`
	}
	jsonErr := json.Unmarshal(body, &reply)
	voucher, voucherOK := validID(voucherView)
	user, userOK := validID(r.user)
	exact := r.user != "" // the first user_id pair is r.user, read the same by both fuzzed stacks

	if code == http.StatusOK {
		// Exactly one order, for the ids the request spelled, under the
		// lock of their canonical key (the fence row of OrderKey).
		if !voucherOK || voucher != testVoucher {
			t.Fatalf("%s 200 for voucher %q", stack, voucherView)
		}
		if after.lastOrder != before.lastOrder+1 || after.stock != before.stock-1 || jsonErr != nil || reply.OrderID != after.lastOrder {
			t.Fatalf("%s 200 %s: orders %d→%d, stock %d→%d", stack, body, before.lastOrder, after.lastOrder, before.stock, after.stock)
		}
		var u, v, fence, lockFence int64
		err := w.st.DB().QueryRowContext(context.Background(), `SELECT user_id, voucher_id, fence FROM orders WHERE id = ?`, reply.OrderID).Scan(&u, &v, &fence)
		if err != nil {
			t.Fatal(err)
		}
		if exact && (!userOK || u != user) || !exact && !userCandidates(r.extra)[u] || v != testVoucher {
			t.Fatalf("%s 200: order of user %d voucher %d for user_id %q, query %q", stack, u, v, r.user, r.extra)
		}
		err = w.st.DB().QueryRowContext(context.Background(), `SELECT fence FROM lockgate_fences WHERE resource = ?`, OrderKey(u, v)).Scan(&lockFence)
		if err != nil || fence <= 0 || lockFence != fence {
			t.Fatalf("%s 200: order fence %d, fence of %s %d (%v): not written under the canonical lock", stack, fence, OrderKey(u, v), lockFence, err)
		}
		if ordersBefore != 0 {
			t.Fatalf("%s 200 for user %d, who had %d orders", stack, u, ordersBefore)
		}
		return
	}

	// Any other answer: nothing written.
	if after != before {
		t.Fatalf("%s %d %s: written: orders %d→%d, stock %d→%d", stack, code, body, before.lastOrder, after.lastOrder, before.stock, after.stock)
	}
	locked := len(keys) > 0 // the lock was taken (and released) at some point
	switch {
	case code == http.StatusBadRequest && reply.Error == MsgAlreadyPurchased:
		if !voucherOK || voucher != testVoucher || exact && (!userOK || ordersBefore == 0) {
			t.Fatalf("%s 400 already purchased for voucher %q user %q (orders %d)", stack, voucherView, r.user, ordersBefore)
		}
	case code == http.StatusBadRequest && strings.Contains(reply.Error, "voucher_id"):
		if voucherOK || locked {
			t.Fatalf("%s 400 %q for voucher_id %q (locked %v): a valid id, or locked", stack, reply.Error, voucherView, keys)
		}
	case code == http.StatusBadRequest && strings.Contains(reply.Error, "user_id"):
		if !voucherOK || exact && userOK || locked {
			t.Fatalf("%s 400 %q for voucher %q user_id %q (locked %v)", stack, reply.Error, voucherView, r.user, keys)
		}
	case code == http.StatusBadRequest && stack == "fiber" && badHeader:
		// fasthttp refused the header itself.
	case code == http.StatusNotFound && reply.Error == MsgUnknownVoucher:
		if !voucherOK || voucher == testVoucher || exact && !userOK || locked {
			t.Fatalf("%s 404 for voucher %q user_id %q (locked %v)", stack, voucherView, r.user, keys)
		}
	case code == http.StatusNotFound:
		// No route: the voucher segment is empty (or not a segment).
		if r.voucher != "" && r.voucher != "." && r.voucher != ".." || locked {
			t.Fatalf("%s 404 %q for voucher %q", stack, body, r.voucher)
		}
	case code == http.StatusRequestEntityTooLarge:
		if len(r.body) <= DefaultBodyLimit || locked {
			t.Fatalf("%s 413 for a body of %d bytes", stack, len(r.body))
		}
	case code == http.StatusRequestHeaderFieldsTooLarge && stack == "fiber":
		if len(r.hvalue)+len(r.hname)+len(r.extra)+len(r.user)+len(r.voucher) < 1024 || locked {
			t.Fatalf("%s 431 for a small request", stack)
		}
	case code/100 == 3 && stack == "nethttp":
		// ServeMux's redirect to the cleaned path (a voucher holding "/"
		// segments such as "..", decoded by net/http).
		if !strings.Contains(r.voucher, ".") && !strings.Contains(r.voucher, "/") || locked {
			t.Fatalf("%s %d for voucher %q", stack, code, r.voucher)
		}
	default:
		t.Fatalf("%s %d %q: not an answer to bad input (voucher %q, user_id %q, query %q, header %q: %q, body %d bytes)",
			stack, code, body, r.voucher, r.user, r.extra, r.hname, r.hvalue, len(r.body))
	}
}

// addOrderSeeds is the seed corpus of both targets: voucher, user,
// extra query, header name, header value, body.
func addOrderSeeds(f *testing.F) {
	for _, s := range []struct {
		voucher, user, extra, hname, hvalue string
		body                                string
	}{
		{"1", "1", "", "", "", ""},
		{"01", "+7", "", "X-Lock-Owner", "1", ""},
		{"1", "0", "", "", "", ""},
		{"1", "-3", "", "", "", ""},
		{"1", "abc", "owner=1", "", "", ""},
		{"1", "99999999999999999999", "", "", "", ""},
		{"1", "9223372036854775807", "", "", "", ""},
		{"0", "1", "", "", "", ""},
		{"999", "1", "", "", "", ""},
		{"abc", "1", "", "", "", ""},
		{"", "1", "", "", "", ""},
		{"..", "1", "", "", "", ""},
		{"1/2", "1", "", "", "", ""},
		{"%31", "1", "", "", "", ""},
		{"1", " 1", "", "", "", ""},
		{"1", "1\x00", "", "", "", ""},
		{"1", "", "user_id=5&user_id=6", "", "", ""},
		{"1", "", "user_id=%zz", "", "", ""},
		{"1", "", "user_id=%31;x=1", "", "", ""},
		{"1", "", "USER_ID=1&user%5Fid=8", "", "", ""},
		{"1", "", "", "", "", ""},
		{"1", "12", "user_id=13", "Content-Type", "application/json", `{"owner": "x", "user_id": 14}`},
		{"1", "15", "", "Content-Type", "multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--x--\r\n"},
		{"1", "16", "", "Content-Length", "0", strings.Repeat("y", 2000)},
		{"1", "17", "", "X-Owner", "\x01\x7f", ""},
		{"1", "18", "", "X-Big", strings.Repeat("h", 5000), ""},
		{"1", "19", "", "Transfer-Encoding", "chunked", "0\r\n\r\n"},
		{"1", "20", "", "Bad Name", "v", ""},
		{"1", "21", "", "", "", strings.Repeat("z", 1025)},
		{"1", "22", "", "", "", strings.Repeat("z", 1024)},
	} {
		f.Add(s.voucher, s.user, s.extra, s.hname, s.hvalue, []byte(s.body))
	}
}

// FuzzFiberOrder fuzzes the order route of NewFiberApp (through app.Test,
// so the bytes go through fasthttp's parser) against a real Redis lock
// and a SQLite store: the voucher id in the path, the user_id query (and
// more of the query), one header, the body. Invariants: no panic; a
// malformed id is a 400 naming the field (voucher_id, else user_id) with
// nothing locked; an unknown voucher is 404; for every non-200 answer
// nothing is written (orders and stock unchanged); no lock hash is left in
// Redis after any answer; a 200 only for a positive id pair of the seeded
// voucher, placing exactly one order for the user the request spelled,
// recorded under the fence of its canonical key OrderKey(user, voucher).
// The seed corpus runs in every go test.
func FuzzFiberOrder(f *testing.F) {
	addOrderSeeds(f)
	w := newOrderWorld(f)
	app, err := NewFiberApp(w.cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, voucher, user, extra, hname, hvalue string, body []byte) {
		r := fuzzRequest{voucher, user, extra, hname, hvalue, body}
		req, badHeader := r.httpRequest()
		before := w.snapshot(t)
		var ordersBefore int64
		if u, ok := validID(user); ok {
			ordersBefore, _ = w.st.CountOrders(context.Background(), u, testVoucher)
		}
		resp, err := app.Test(req, 10_000)
		var code int
		var b []byte
		switch {
		// fasthttp refused the request before any handler: a client gets
		// the status, app.Test only the error.
		case errors.Is(err, fasthttp.ErrBodyTooLarge):
			code = http.StatusRequestEntityTooLarge
		case errors.As(err, new(*fasthttp.ErrSmallBuffer)):
			code = http.StatusRequestHeaderFieldsTooLarge
		case err != nil && badHeader:
			code = http.StatusBadRequest
		case err != nil:
			t.Fatalf("app.Test: %v", err)
		default:
			code = resp.StatusCode
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		w.checkOrder(t, "fiber", r, url.PathEscape(voucher), badHeader, before, ordersBefore, code, b)
	})
}

// FuzzHTTPOrder is FuzzFiberOrder on NewHTTPHandler, through httptest
// (the handler sees the request as net/http's server would hand it over:
// the path decoded, the header as sent).
func FuzzHTTPOrder(f *testing.F) {
	addOrderSeeds(f)
	w := newOrderWorld(f)
	h, err := NewHTTPHandler(w.cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, voucher, user, extra, hname, hvalue string, body []byte) {
		r := fuzzRequest{voucher, user, extra, hname, hvalue, body}
		req, badHeader := r.httpRequest()
		before := w.snapshot(t)
		var ordersBefore int64
		if u, ok := validID(user); ok {
			ordersBefore, _ = w.st.CountOrders(context.Background(), u, testVoucher)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		w.checkOrder(t, "nethttp", r, voucher, badHeader, before, ordersBefore, rec.Code, rec.Body.Bytes())
	})
}
