package redistest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// proxyClient returns a client of p's address with the given read timeout
// and retries (0: go-redis's default of 3; -1: none), closed at cleanup.
func proxyClient(t *testing.T, p *redistest.Proxy, readTimeout time.Duration, maxRetries int) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:         p.Addr,
		DialTimeout:  time.Second,
		ReadTimeout:  readTimeout,
		WriteTimeout: time.Second,
		MaxRetries:   maxRetries,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// connectedProxy starts a server, a proxy in front of it and a client of
// the proxy (read timeout rt, no retries) that has connected already, so
// that a test's first timed command does not pay the dial.
func connectedProxy(t *testing.T, rt time.Duration) (*redistest.Server, *redistest.Proxy, *redis.Client, context.Context) {
	t.Helper()
	srv := redistest.Start(t)
	p := redistest.StartProxy(t, srv.Addr)
	c := proxyClient(t, p, rt, -1)
	ctx := testContext(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	return srv, p, c, ctx
}

// waitClosed fails t unless ch is closed within d.
func waitClosed(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s not within %v", what, d)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// pingUntilOK pings up to 20 times, 50ms apart, until one is answered.
func pingUntilOK(ctx context.Context, c *redis.Client) error {
	var err error
	for try := 0; try < 20; try++ {
		if err = c.Ping(ctx).Err(); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// TestProxyHoldReplyRunsCommandTwice is the probe the fault tests rely on:
// with go-redis's default retries, a reply held past the client's
// ReadTimeout makes the client send the command again, so Redis runs it
// twice and the client sees the second result. The control, without a
// hold, runs it once.
func TestProxyHoldReplyRunsCommandTwice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		hold bool
		want int64
	}{{"held", true, 2}, {"control", false, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			p := redistest.StartProxy(t, srv.Addr)
			c := proxyClient(t, p, 300*time.Millisecond, 0) // MaxRetries 0: the default, 3 retries
			ctx := testContext(t)
			var h *redistest.Hold
			if tc.hold {
				h = p.HoldReply(redistest.MatchCommand("INCR", "k"), 700*time.Millisecond)
			}
			n, err := c.Incr(ctx, "k").Result()
			if err != nil {
				t.Fatalf("INCR k: %v", err)
			}
			if n != tc.want {
				t.Fatalf("INCR k returned %d, want %d", n, tc.want)
			}
			if v, err := srv.Client(t).Get(ctx, "k").Int64(); err != nil || v != tc.want {
				t.Fatalf("k on Redis itself: %d, %v; want %d", v, err, tc.want)
			}
			if got := p.Count("INCR"); got != int(tc.want) {
				t.Fatalf("Count(INCR) = %d, want %d", got, tc.want)
			}
			if h != nil {
				if !isClosed(h.Matched()) {
					t.Fatal("Matched not closed after the command ran")
				}
				// The client closed the timed-out connection: the reply is dropped.
				waitClosed(t, h.Released(), 5*time.Second, "Released")
			}
		})
	}
}

// TestProxyHoldReplyChannels: Matched fires when the command reached Redis,
// Answered when Redis's reply reached the proxy (Redis has executed it while
// the reply is held), Released when the reply is written, not before the
// hold is over; the client then gets its reply.
func TestProxyHoldReplyChannels(t *testing.T) {
	t.Parallel()
	srv, p, c, ctx := connectedProxy(t, 5*time.Second)
	const hold = time.Second
	h := p.HoldReply(redistest.MatchCommand("set", "held"), hold)
	if isClosed(h.Matched()) || isClosed(h.Answered()) || isClosed(h.Released()) {
		t.Fatal("channels closed before any command")
	}
	start := time.Now()
	res := make(chan error, 1)
	go func() { res <- c.Set(ctx, "held", "v", 0).Err() }()
	waitClosed(t, h.Matched(), 5*time.Second, "Matched")
	waitClosed(t, h.Answered(), 5*time.Second, "Answered")
	if v, err := srv.Client(t).Get(ctx, "held").Result(); err != nil || v != "v" {
		t.Fatalf("Redis has not executed the held SET: %q, %v", v, err)
	}
	if isClosed(h.Released()) {
		t.Fatal("Released before the hold was over")
	}
	waitClosed(t, h.Released(), 5*time.Second, "Released")
	if el := time.Since(start); el < hold {
		t.Fatalf("Released after %v, before the hold of %v", el, hold)
	}
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("SET through the hold: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SET did not return after Released")
	}
	// The hold took one command only.
	start = time.Now()
	if err := c.Set(ctx, "held", "w", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el >= hold {
		t.Fatalf("a second SET took %v: held too", el)
	}
}

// TestProxyHoldLet: Let writes a held reply at once, long before its
// hold of an hour is over. Control: until Let, the reply stays held
// although Redis has answered.
func TestProxyHoldLet(t *testing.T) {
	t.Parallel()
	_, p, c, ctx := connectedProxy(t, 2*time.Hour)
	h := p.HoldReply(redistest.MatchCommand("set", "let"), time.Hour)
	res := make(chan error, 1)
	go func() { res <- c.Set(ctx, "let", "v", 0).Err() }()
	waitClosed(t, h.Answered(), 5*time.Second, "Answered")
	select {
	case err := <-res:
		t.Fatalf("control: the SET returned (%v) while its reply was held", err)
	case <-time.After(200 * time.Millisecond):
	}
	h.Let()
	h.Let() // again: nothing
	waitClosed(t, h.Released(), 5*time.Second, "Released after Let")
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("SET after Let: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SET did not return after Let")
	}
}

// TestProxyHoldKeepsOrder sends, on a raw connection, a RESP SET and an
// inline PING in one write: the PONG waits behind the held +OK, and both
// commands are counted.
func TestProxyHoldKeepsOrder(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p := redistest.StartProxy(t, srv.Addr)
	const hold = 500 * time.Millisecond
	h := p.HoldReply(redistest.MatchCommand("SET", "order"), hold)
	conn, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := io.WriteString(conn, "*3\r\n$3\r\nSET\r\n$5\r\norder\r\n$1\r\n1\r\nPING\r\n"); err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 1)
	if _, err := io.ReadFull(conn, first); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < hold {
		t.Fatalf("first reply byte after %v, within the hold of %v", el, hold)
	}
	rest := make([]byte, len("+OK\r\n+PONG\r\n")-1)
	if _, err := io.ReadFull(conn, rest); err != nil {
		t.Fatal(err)
	}
	if got := string(first) + string(rest); got != "+OK\r\n+PONG\r\n" {
		t.Fatalf("replies %q, want +OK then +PONG", got)
	}
	waitClosed(t, h.Released(), time.Second, "Released")
	if p.Count("set") != 1 || p.Count("PING") != 1 {
		t.Fatalf("Count(SET) = %d, Count(PING) = %d; want 1 and 1", p.Count("SET"), p.Count("PING"))
	}
}

// readUntil reads from conn until what it read ends with suffix.
func readUntil(conn net.Conn, suffix string) ([]byte, error) {
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.HasSuffix(got, []byte(suffix)) {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

// TestProxyRESP3Replies passes every RESP3 reply type Redis's DEBUG
// PROTOCOL sends (attributes, a push before a reply, map, set, big number,
// double, boolean, verbatim string, null) unchanged, and pairs them right:
// a hold on the PING after them delays the PONG only.
func TestProxyRESP3Replies(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--enable-debug-command", "yes")
	p := redistest.StartProxy(t, srv.Addr)
	var cmds strings.Builder
	for _, typ := range []string{"attrib", "push", "map", "set", "bignum", "double", "true", "false", "verbatim", "null"} {
		cmds.WriteString("DEBUG PROTOCOL " + typ + "\r\n")
	}
	cmds.WriteString("*0\r\n\r\nECHO before-pong\r\nPING\r\n") // empty requests get no reply
	// exchange switches a new connection to RESP3 and sends cmds,
	// returning the replies, how long the ones before PONG took, and how
	// long all took.
	exchange := func(addr string) (replies []byte, beforePong, all time.Duration) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		// HELLO's reply holds the connection id, which differs: skip it.
		if _, err := io.WriteString(conn, "HELLO 3\r\nECHO hello-done\r\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := readUntil(conn, "$10\r\nhello-done\r\n"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := io.WriteString(conn, cmds.String()); err != nil {
			t.Fatal(err)
		}
		var got []byte
		buf := make([]byte, 4096)
		for !bytes.HasSuffix(got, []byte("+PONG\r\n")) {
			n, err := conn.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				t.Fatalf("%q: %v", got, err)
			}
			if beforePong == 0 && bytes.Contains(got, []byte("$11\r\nbefore-pong\r\n")) {
				beforePong = time.Since(start)
			}
		}
		return got, beforePong, time.Since(start)
	}
	want, _, _ := exchange(srv.Addr)
	for _, frag := range []string{"|1\r\n", ">2\r\n", "%", "~", "(", ",", "#t", "=", "_\r\n"} {
		if !bytes.Contains(want, []byte(frag)) {
			t.Fatalf("Redis's replies lack %q: %q", frag, want)
		}
	}
	const hold = 600 * time.Millisecond
	h := p.HoldReply(redistest.MatchCommand("PING"), hold)
	got, beforePong, all := exchange(p.Addr)
	if !bytes.Equal(got, want) {
		t.Fatalf("through the proxy:\n%q\nstraight from Redis:\n%q", got, want)
	}
	if beforePong >= hold {
		t.Fatalf("the replies before PONG took %v: the hold hit the wrong reply", beforePong)
	}
	if all < hold {
		t.Fatalf("PONG after %v, within the hold of %v", all, hold)
	}
	waitClosed(t, h.Released(), time.Second, "Released")
	if n := p.Count("DEBUG"); n != 10 {
		t.Fatalf("Count(DEBUG) = %d, want 10", n)
	}
}

// TestProxyPubSubPassesThrough subscribes through the proxy in RESP2 and
// RESP3: messages published straight to Redis arrive, and the subscribed
// connection is passed through unparsed (its PING is answered, not held).
func TestProxyPubSubPassesThrough(t *testing.T) {
	t.Parallel()
	for _, proto := range []int{2, 3} {
		t.Run("RESP"+string(rune('0'+proto)), func(t *testing.T) {
			srv := redistest.Start(t)
			p := redistest.StartProxy(t, srv.Addr)
			c := redis.NewClient(&redis.Options{Addr: p.Addr, Protocol: proto, ReadTimeout: 2 * time.Second, MaxRetries: -1})
			defer c.Close()
			ctx := testContext(t)
			sub := c.Subscribe(ctx, "ch")
			defer sub.Close()
			if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
				t.Fatal(err)
			}
			if err := srv.Client(t).Publish(ctx, "ch", "hi").Err(); err != nil {
				t.Fatal(err)
			}
			msg, err := sub.ReceiveMessage(ctx)
			if err != nil || msg.Payload != "hi" {
				t.Fatalf("message through the proxy: %v, %v", msg, err)
			}
			if n := p.Count("SUBSCRIBE"); n != 1 {
				t.Fatalf("Count(SUBSCRIBE) = %d, want 1", n)
			}
			if err := c.Ping(ctx).Err(); err != nil { // an ordinary connection beside it
				t.Fatal(err)
			}
			// The subscribed connection is passed through: a hold does not
			// take its PING, nor does Count see it.
			pings := p.Count("PING")
			h := p.HoldReply(redistest.MatchCommand("PING"), time.Hour)
			if err := sub.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := sub.Receive(ctx); err != nil { // the pong
				t.Fatal(err)
			}
			if isClosed(h.Matched()) || p.Count("PING") != pings {
				t.Fatal("a PING of a subscribed connection was matched or counted")
			}
		})
	}
}

// TestProxyLatency: a PING takes at least the latency; with latency 0 it
// is fast again.
func TestProxyLatency(t *testing.T) {
	t.Parallel()
	_, p, c, ctx := connectedProxy(t, 3*time.Second)
	const latency = 400 * time.Millisecond
	p.SetLatency(latency)
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < latency {
		t.Fatalf("PING with latency %v took %v", latency, el)
	}
	p.SetLatency(0)
	start = time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el >= latency {
		t.Fatalf("PING after SetLatency(0) took %v", el)
	}
}

// TestProxyCut: a command in flight fails at once when its connection is
// cut, its held reply is dropped, and the client works again afterwards.
func TestProxyCut(t *testing.T) {
	t.Parallel()
	_, p, c, ctx := connectedProxy(t, 10*time.Second)
	h := p.HoldReply(redistest.MatchCommand("GET", "cut"), time.Minute) // keeps the GET in flight
	res := make(chan error, 1)
	go func() { res <- c.Get(ctx, "cut").Err() }()
	waitClosed(t, h.Matched(), 5*time.Second, "Matched")
	p.Cut()
	select {
	case err := <-res:
		if err == nil || err == redis.Nil {
			t.Fatalf("GET in flight during Cut: %v, want a connection error", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("GET in flight did not fail after Cut")
	}
	waitClosed(t, h.Released(), 3*time.Second, "Released after Cut")
	if err := pingUntilOK(ctx, c); err != nil {
		t.Fatalf("PING after Cut: %v", err)
	}
}

// TestProxyStall: while stalled, a command is neither forwarded nor
// answered (a short ReadTimeout fires, a long one keeps waiting); Unstall
// delivers the waiting command and its reply, and new commands work.
func TestProxyStall(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p := redistest.StartProxy(t, srv.Addr)
	short := proxyClient(t, p, 200*time.Millisecond, -1)
	long := proxyClient(t, p, 5*time.Second, -1)
	ctx := testContext(t)
	for _, c := range []*redis.Client{short, long} {
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	p.Stall()
	res := make(chan error, 1)
	go func() {
		v, err := long.Echo(ctx, "stalled").Result()
		if err == nil && v != "stalled" {
			err = errors.New("ECHO returned " + v)
		}
		res <- err
	}()
	err := short.Ping(ctx).Err()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("PING while stalled: %v, want a read timeout", err)
	}
	select {
	case err := <-res:
		t.Fatalf("ECHO completed while stalled: %v", err)
	case <-time.After(300 * time.Millisecond): // the stall lasts
	}
	if n := p.Count("ECHO"); n != 0 {
		t.Fatalf("Count(ECHO) = %d while stalled, want 0", n)
	}
	p.Unstall()
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("ECHO sent while stalled, after Unstall: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("ECHO sent while stalled did not complete after Unstall")
	}
	if err := pingUntilOK(ctx, short); err != nil {
		t.Fatalf("PING after Unstall: %v", err)
	}
}

// TestProxyRefuse: while refusing, every command fails, also on new
// connections; afterwards commands work again.
func TestProxyRefuse(t *testing.T) {
	t.Parallel()
	_, p, c, ctx := connectedProxy(t, 300*time.Millisecond)
	p.SetRefuse(true)
	for i := 0; i < 3; i++ {
		if err := c.Ping(ctx).Err(); err == nil {
			t.Fatalf("PING %d answered while refusing", i)
		}
	}
	if err := proxyClient(t, p, 300*time.Millisecond, 0).Ping(ctx).Err(); err == nil {
		t.Fatal("a new client with retries got an answer while refusing")
	}
	p.SetRefuse(false)
	if err := pingUntilOK(ctx, c); err != nil {
		t.Fatalf("PING after SetRefuse(false): %v", err)
	}
}

// TestProxyBadRequestClosesConnection: bytes that are not a RESP request
// close the connection, and nothing reaches Redis.
func TestProxyBadRequestClosesConnection(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p := redistest.StartProxy(t, srv.Addr)
	conn, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "*1\r\n:5\r\n"); err != nil { // an integer, not a bulk string
		t.Fatal(err)
	}
	n, err := conn.Read(make([]byte, 64))
	var ne net.Error
	if n != 0 || err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("read after a bad request: %d bytes, %v; want the connection closed", n, err)
	}
}

// TestProxyClose: Close ends every goroutine, including those of open
// connections with a reply held, even with a hold that never matched; the
// held reply is dropped, the client gets an error, and a second Close is
// harmless.
func TestProxyClose(t *testing.T) {
	srv := redistest.Start(t)
	ignore := goleak.IgnoreCurrent() // the server's own goroutines
	p, err := redistest.NewProxy(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	never := p.HoldReply(redistest.MatchCommand("NEVER-SENT"), time.Hour)
	held := p.HoldReply(redistest.MatchCommand("GET", "close"), time.Hour)
	c := redis.NewClient(&redis.Options{Addr: p.Addr, ReadTimeout: 10 * time.Second, MaxRetries: -1})
	ctx := testContext(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- c.Get(ctx, "close").Err() }()
	waitClosed(t, held.Matched(), 5*time.Second, "Matched")
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	waitClosed(t, closed, 3*time.Second, "Close")
	if !isClosed(held.Released()) {
		t.Fatal("a held reply was not dropped by Close")
	}
	if isClosed(never.Matched()) || isClosed(never.Released()) {
		t.Fatal("Close closed the channels of a hold that never matched")
	}
	select {
	case err := <-res:
		if err == nil || err == redis.Nil {
			t.Fatalf("GET held during Close: %v, want a connection error", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("GET held during Close did not fail")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	c.Close()
	goleak.VerifyNone(t, ignore)
}

// A Watch counts only the commands its Matcher selects, from its start.
func TestProxyWatch(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p := redistest.StartProxy(t, srv.Addr)
	o := srv.Options()
	o.Addr = p.Addr
	c := redis.NewClient(o)
	defer c.Close()
	ctx := context.Background()
	c.Set(ctx, "a", "1", 0)
	w := p.Watch(redistest.MatchCommand("get", "a"))
	all := p.Watch(nil)
	c.Get(ctx, "a")
	c.Get(ctx, "b")
	c.Set(ctx, "a", "2", 0)
	if n := w.Count(); n != 1 {
		t.Fatalf("watch counted %d GETs of a, want 1", n)
	}
	if n := all.Count(); n != 3 {
		t.Fatalf("nil watch counted %d, want 3", n)
	}
}
