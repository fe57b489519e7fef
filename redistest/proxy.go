package redistest

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// proxyDialTimeout bounds how long the proxy waits to connect to its target
// for a new client connection.
const proxyDialTimeout = 5 * time.Second

// Proxy is a TCP proxy on 127.0.0.1 in front of a Redis server that
// understands RESP well enough to act on single commands and replies: it
// counts commands, holds one chosen reply late (HoldReply), delays every
// reply (SetLatency), and breaks the network: Cut, Stall, SetRefuse.
//
// Each client connection gets its own connection to the target. Requests
// are RESP arrays of bulk strings or inline commands; replies may be of any
// RESP2 or RESP3 type, with attributes. Replies are paired with requests in
// order per connection; RESP3 pushes (>) are passed on unpaired. A
// connection that sends SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE or MONITOR is from
// then on passed through unparsed in both directions: its later commands are
// neither counted nor matched by holds, but Stall, SetLatency (per chunk of
// bytes), Cut and SetRefuse still act on it. CLIENT REPLY OFF or SKIP is not
// supported (replies would be paired with the wrong requests). Bytes that
// are not such RESP close their connection.
//
// All methods are safe for concurrent use.
type Proxy struct {
	// Addr is host:port, e.g. "127.0.0.1:40124".
	Addr string
	// Port is the TCP port.
	Port int

	target string
	ln     net.Listener
	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the proxy started

	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	closed  bool
	conns   map[*proxyConn]struct{}
	holds   []*Hold // waiting for their command, oldest first
	watches []*Watch
	counts  map[string]int
	latency time.Duration
	refuse  bool
	stalled bool
	flowing chan struct{} // closed while not stalled
}

// NewProxy listens on a free loopback port and forwards every connection
// it accepts to target (host:port), over a connection of its own dialed
// when the client connects; a client whose connection to target cannot be
// made within 5s is disconnected. It fails only when it cannot listen. The
// caller must Close it; in tests prefer StartProxy.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		Addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Port:    port,
		target:  target,
		ln:      ln,
		ctx:     ctx,
		cancel:  cancel,
		conns:   map[*proxyConn]struct{}{},
		counts:  map[string]int{},
		flowing: make(chan struct{}),
	}
	close(p.flowing)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// StartProxy is NewProxy for a test: it fails tb when the proxy cannot
// listen and closes it in tb.Cleanup.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := NewProxy(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// Close stops accepting, closes every connection (held and delayed replies
// are dropped) and returns once every goroutine of the proxy has ended. It
// returns the error of closing the listener; a second Close returns the
// same and does nothing else.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.cancel()
		p.closeErr = p.ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p.closeErr
}

// Matcher selects commands: cmd[0] is the command name as the client sent
// it, its arguments follow. The proxy calls it under its lock, so it must
// be quick and must not call the Proxy.
type Matcher func(cmd []string) bool

// MatchCommand matches commands named name (case-insensitive) in which
// every string of argsContain equals, or is contained in, some argument
// (case-sensitive), e.g. MatchCommand("EVALSHA", lockKey).
func MatchCommand(name string, argsContain ...string) Matcher {
	return func(cmd []string) bool {
		if len(cmd) == 0 || !strings.EqualFold(cmd[0], name) {
			return false
		}
		for _, want := range argsContain {
			found := false
			for _, arg := range cmd[1:] {
				if strings.Contains(arg, want) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
}

// Hold is one reply held back by HoldReply.
type Hold struct {
	match    Matcher
	d        time.Duration
	matched  chan struct{}
	answered chan struct{}
	released chan struct{}
	let      chan struct{}
	once     sync.Once // closes released
	answer   sync.Once // closes answered
	letOnce  sync.Once // closes let
}

// HoldReply holds the reply of the next command that m matches (a nil m
// matches any), on whichever connection it comes: the command is forwarded
// to Redis at once, so Redis executes it, but its reply is written to the
// client only d after Redis sent it (instead of any SetLatency). Replies
// after it on the same connection wait behind it, in order. If the
// connection closes first (the client gave up after its ReadTimeout, Cut,
// SetRefuse, Close), the reply is dropped. Let ends the hold before d.
// Only that one command is affected; several holds are taken by matching
// commands oldest first.
//
// A client that times out before d and retries (go-redis does, MaxRetries
// 3 by default) thus makes Redis run the command twice.
func (p *Proxy) HoldReply(m Matcher, d time.Duration) *Hold {
	if m == nil {
		m = func([]string) bool { return true }
	}
	h := &Hold{match: m, d: max(d, 0), matched: make(chan struct{}), answered: make(chan struct{}), released: make(chan struct{}), let: make(chan struct{})}
	p.mu.Lock()
	p.holds = append(p.holds, h)
	p.mu.Unlock()
	return h
}

// Matched is closed when the matching command has been forwarded to Redis.
// It stays open while no command matches, also after Close.
func (h *Hold) Matched() <-chan struct{} { return h.matched }

// Answered is closed when Redis's reply to the matching command has reached
// the proxy (Redis has run the command), before it is held. It stays open
// while no command matches, or if the connection ends before the reply.
func (h *Hold) Answered() <-chan struct{} { return h.answered }

// Released is closed when the held reply has been written to the client,
// or dropped because its connection closed first. It is closed only after
// Matched, and stays open while no command matches.
func (h *Hold) Released() <-chan struct{} { return h.released }

// Let ends the hold now: the reply is written as soon as Redis has sent
// it (and the replies before it on its connection are written), however
// much of d is left. A test lets a reply go on a signal of its own instead
// of guessing a d long enough for a loaded machine. Calling it again, or
// after the reply was written, does nothing.
func (h *Hold) Let() { h.letOnce.Do(func() { close(h.let) }) }

func (h *Hold) release() {
	if h != nil {
		h.once.Do(func() { close(h.released) })
	}
}

// SetLatency delays every reply by d from when Redis sent it, keeping
// their order; 0 (the default) turns it off. It applies to replies that
// arrive from Redis afterwards.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = max(d, 0)
	p.mu.Unlock()
}

// Cut closes every open connection, on both sides, at once: a client sees
// its connection reset or ended, and commands in flight get no reply. New
// connections are still accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Stall stops forwarding in both directions, like a hung network: the
// connections stay open, commands and replies wait in buffers, and clients
// time out. Stalling a stalled proxy does nothing.
func (p *Proxy) Stall() {
	p.mu.Lock()
	if !p.stalled {
		p.stalled, p.flowing = true, make(chan struct{})
	}
	p.mu.Unlock()
}

// Unstall resumes forwarding: what waited is forwarded in order (replies
// whose latency or hold has passed at once), then traffic flows as before.
func (p *Proxy) Unstall() {
	p.mu.Lock()
	if p.stalled {
		p.stalled = false
		close(p.flowing)
	}
	p.mu.Unlock()
}

// SetRefuse(true) makes the proxy a dead host: it cuts every connection
// and closes new ones as soon as they are accepted (the client's dial
// succeeds, its first command fails). SetRefuse(false) accepts again.
func (p *Proxy) SetRefuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
	if on {
		p.Cut()
	}
}

// Count returns how many commands named name (case-insensitive) the proxy
// has forwarded to Redis so far, on all connections; commands of a
// connection passed through after SUBSCRIBE or MONITOR are not counted.
func (p *Proxy) Count(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[strings.ToUpper(name)]
}

// Watch counts the commands a Matcher selects, from when it was made.
type Watch struct {
	p *Proxy
	m Matcher
	n int
}

// Watch starts counting the commands m matches that are forwarded to Redis
// from now on (a nil m matches every command).
func (p *Proxy) Watch(m Matcher) *Watch {
	if m == nil {
		m = func([]string) bool { return true }
	}
	w := &Watch{p: p, m: m}
	p.mu.Lock()
	p.watches = append(p.watches, w)
	p.mu.Unlock()
	return w
}

// Count returns how many matching commands were forwarded so far.
func (w *Watch) Count() int {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.n
}

// accept serves the listener until Close.
func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors or the like: try again shortly.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

// serve connects client to the target and relays between them until
// either side ends or the proxy cuts them.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if p.refusing() {
		client.Close()
		return
	}
	dialer := net.Dialer{Timeout: proxyDialTimeout}
	server, err := dialer.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	c := &proxyConn{p: p, client: client, server: server, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	if !p.track(c) {
		c.close()
		return
	}
	var relays sync.WaitGroup
	relays.Add(2)
	go func() { defer relays.Done(); c.replies() }()
	go func() { defer relays.Done(); c.write() }()
	c.requests()
	relays.Wait()
	p.untrack(c)
	c.dropHolds()
}

func (p *Proxy) refusing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refuse || p.closed
}

// track registers c for Cut and Close, unless the proxy is closed or
// refusing, which it reports by returning false.
func (p *Proxy) track(c *proxyConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse || p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c *proxyConn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// claimHold removes and returns the oldest hold that matches cmd, or nil.
func (p *Proxy) claimHold(cmd []string) *Hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, h := range p.holds {
		if h.match(cmd) {
			p.holds = append(p.holds[:i:i], p.holds[i+1:]...)
			return h
		}
	}
	return nil
}

// flowingCh returns a channel closed while the proxy is not stalled.
func (p *Proxy) flowingCh() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flowing
}

// proxyConn is one client connection and its connection to the target. Three
// goroutines relay it: requests (client to server; the serve goroutine),
// replies (server to the out queue) and write (out queue to client).
type proxyConn struct {
	p              *Proxy
	client, server net.Conn
	done           chan struct{} // closed by close
	closeOnce      sync.Once
	wake           chan struct{} // a reply was queued, or the server ended

	mu        sync.Mutex
	pending   []*request // forwarded, awaiting their reply, oldest first
	out       []reply    // waiting to be written to the client, in order
	serverEnd bool       // no more replies will be queued

	unsent *Hold // claimed by a command whose forwarding failed; owned by requests
}

// request is a command forwarded to the server.
type request struct {
	hold        *Hold
	passthrough bool // its reply starts Pub/Sub or MONITOR: pass the rest through
}

// reply is bytes for the client and when they are due.
type reply struct {
	data []byte
	due  time.Time
	hold *Hold
}

// close closes both sides at once; every relay goroutine then ends.
func (c *proxyConn) close() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.client.Close()
		c.server.Close()
	})
}

// waitFlowing waits while the proxy is stalled; false means c was closed.
func (c *proxyConn) waitFlowing() bool {
	select {
	case <-c.p.flowingCh():
		return true
	case <-c.done:
		return false
	}
}

// requests reads commands from the client and forwards them, one by one,
// to the server.
func (c *proxyConn) requests() {
	defer c.close()
	rd := newRespReader(c.client)
	for {
		cmd, raw, err := rd.readCommand()
		if err != nil || !c.waitFlowing() {
			return
		}
		if len(cmd) == 0 { // an empty request: Redis ignores it, without a reply
			if _, err := c.server.Write(raw); err != nil {
				return
			}
			continue
		}
		name := strings.ToUpper(cmd[0])
		req := &request{hold: c.p.claimHold(cmd)}
		switch name {
		case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "MONITOR":
			req.passthrough = true
		}
		// Queued before it is sent, so that its reply finds it.
		c.mu.Lock()
		c.pending = append(c.pending, req)
		c.mu.Unlock()
		// Counted before it is sent, so that a client that has its reply
		// finds it counted; uncounted again if it could not be sent.
		watched := c.count(name, cmd)
		if _, err := c.server.Write(raw); err != nil {
			c.uncount(name, watched)
			c.unsent = req.hold // it may match the next command instead
			return
		}
		if req.hold != nil {
			close(req.hold.matched)
		}
		if req.passthrough {
			c.pass(rd, c.server)
			return
		}
	}
}

// count adds a forwarded command to the proxy's counts and to the Watches
// it matches, which it returns.
func (c *proxyConn) count(name string, cmd []string) []*Watch {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.p.counts[name]++
	var matched []*Watch
	for _, w := range c.p.watches {
		if w.m(cmd) {
			w.n++
			matched = append(matched, w)
		}
	}
	return matched
}

// uncount takes back a count of a command that could not be sent.
func (c *proxyConn) uncount(name string, watched []*Watch) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.p.counts[name]--
	for _, w := range watched {
		w.n--
	}
}

// pass copies what rd reads to w, unparsed, while not stalled.
func (c *proxyConn) pass(rd *respReader, w net.Conn) {
	for {
		b, err := rd.chunk()
		if err != nil || !c.waitFlowing() {
			return
		}
		if _, err := w.Write(b); err != nil {
			return
		}
	}
}

// replies reads replies from the server, pairs each with its request and
// queues it for the client. When the server ends, the queue is still
// written out; on bytes that are not RESP, the connection closes at once.
func (c *proxyConn) replies() {
	defer c.endReplies()
	rd := newRespReader(c.server)
	for {
		raw, push, err := rd.readReply()
		if err != nil {
			if errors.Is(err, errProtocol) {
				c.close()
			}
			return
		}
		var req request
		c.mu.Lock()
		// A push belongs to no request, except the push that answers
		// SUBSCRIBE in RESP3. A reply with no request left (a server that
		// sends unasked) is passed on as it is.
		if len(c.pending) > 0 && (!push || c.pending[0].passthrough) {
			req = *c.pending[0]
			c.pending = c.pending[1:]
		}
		c.mu.Unlock()
		c.queue(raw, req.hold)
		if req.passthrough {
			for {
				b, err := rd.chunk()
				if err != nil {
					return
				}
				c.queue(b, nil)
			}
		}
	}
}

// queue adds data, which Redis has just sent, to the client's queue, due
// after the latency or, if held, after the hold.
func (c *proxyConn) queue(data []byte, h *Hold) {
	c.p.mu.Lock()
	delay := c.p.latency
	c.p.mu.Unlock()
	if h != nil {
		delay = h.d
		h.answer.Do(func() { close(h.answered) })
	}
	c.mu.Lock()
	c.out = append(c.out, reply{data: data, due: time.Now().Add(delay), hold: h})
	c.mu.Unlock()
	c.signal()
}

func (c *proxyConn) endReplies() {
	c.mu.Lock()
	c.serverEnd = true
	c.mu.Unlock()
	c.signal()
}

func (c *proxyConn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// write writes the queued replies to the client in order, each when due
// and not stalled. It closes the connection once the server has ended and
// the queue is written.
func (c *proxyConn) write() {
	defer c.close()
	for {
		r, ok := c.next()
		if !ok {
			return
		}
		if !c.wait(r) {
			c.mu.Lock()
			c.out = append([]reply{r}, c.out...) // for dropHolds
			c.mu.Unlock()
			return
		}
		_, err := c.client.Write(r.data)
		r.hold.release()
		if err != nil {
			return
		}
	}
}

// next takes the first queued reply, waiting for one; false means the
// server has ended and all is written, or c was closed.
func (c *proxyConn) next() (reply, bool) {
	for {
		c.mu.Lock()
		if len(c.out) > 0 {
			r := c.out[0]
			c.out = c.out[1:]
			c.mu.Unlock()
			return r, true
		}
		end := c.serverEnd
		c.mu.Unlock()
		if end {
			return reply{}, false
		}
		select {
		case <-c.wake:
		case <-c.done:
			return reply{}, false
		}
	}
}

// wait waits until r is due, its command is known to be forwarded, and the
// proxy is not stalled; false means c was closed.
func (c *proxyConn) wait(r reply) bool {
	if d := time.Until(r.due); d > 0 {
		var let chan struct{} // nil, never ready, when r is not held
		if r.hold != nil {
			let = r.hold.let
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-let:
		case <-c.done:
			return false
		}
	}
	if r.hold != nil {
		// Its reply can be read before requests closes Matched.
		select {
		case <-r.hold.matched:
		case <-c.done:
			return false
		}
	}
	return c.waitFlowing()
}

// dropHolds settles the holds of a connection that has ended: replies
// held and not written are dropped (Released), and a hold whose command
// could not be forwarded waits for the next matching command again. It
// runs after every relay goroutine of c has returned.
func (c *proxyConn) dropHolds() {
	for _, req := range c.pending {
		if req.hold != c.unsent {
			req.hold.release()
		}
	}
	for _, r := range c.out {
		if r.hold != c.unsent {
			r.hold.release()
		}
	}
	if c.unsent != nil {
		c.p.mu.Lock()
		c.p.holds = append([]*Hold{c.unsent}, c.p.holds...)
		c.p.mu.Unlock()
	}
}
