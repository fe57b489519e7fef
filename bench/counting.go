package bench

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// counters counts the commands the clients of one configuration send, two
// ways:
//
//   - wire: every RESP command written on any of their connections, parsed
//     from the bytes (so pipelined commands, Pub/Sub (un)subscriptions,
//     pings, connection handshakes and rueidis's commands all count);
//   - hook: a go-redis hook (ProcessHook + ProcessPipelineHook, one per
//     command of a pipeline). go-redis sends Pub/Sub commands past its
//     hooks, and rueidis has none, so hook ≤ wire.
type counters struct {
	wire atomic.Int64
	hook atomic.Int64
	// broken is set when a connection wrote something that is not RESP
	// arrays of bulk strings: then wire is not trustworthy.
	broken atomic.Bool
	// hooked is set once a go-redis client carries the hook.
	hooked atomic.Bool
}

// snapshot is the two counts at one moment.
type snapshot struct{ wire, hook int64 }

func (c *counters) snap() snapshot {
	if c == nil {
		return snapshot{}
	}
	return snapshot{c.wire.Load(), c.hook.Load()}
}

// instrument adds the hook and the wire counter to a go-redis client.
func (c *counters) instrument(rdb *redis.Client) {
	if c == nil {
		return
	}
	c.hooked.Store(true)
	rdb.AddHook(countHook{c})
}

// instrumentCluster is instrument for a Cluster client: the hook counts
// the commands it is given, and each node client it makes counts what it
// writes (a Cluster client dials through its nodes' clients).
func (c *counters) instrumentCluster(cc *redis.ClusterClient) {
	if c == nil {
		return
	}
	c.hooked.Store(true)
	cc.AddHook(countHook{c})
	cc.OnNewNode(func(n *redis.Client) { n.AddHook(wireHook{c}) })
}

// wireHook only counts what its client's connections write (a Cluster's
// node clients: their commands are counted by the Cluster client's hook).
type wireHook struct{ c *counters }

func (h wireHook) DialHook(next redis.DialHook) redis.DialHook        { return countHook(h).DialHook(next) }
func (wireHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (wireHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// dial wraps a connection made by any client in the wire counter.
func (c *counters) wrap(conn net.Conn) net.Conn {
	if c == nil || conn == nil {
		return conn
	}
	return &countedConn{Conn: conn, c: c}
}

type countHook struct{ c *counters }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		return h.c.wrap(conn), err
	}
}

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.c.hook.Add(1)
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.c.hook.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// countedConn counts the RESP commands written through it. It exposes the
// socket (SyscallConn, NetConn) so that the clients' connection health
// checks work as on a bare TCP connection.
type countedConn struct {
	net.Conn
	c  *counters
	mu sync.Mutex
	sc respScanner
}

func (cc *countedConn) Write(p []byte) (int, error) {
	cc.mu.Lock()
	n, ok := cc.sc.scan(p)
	cc.mu.Unlock()
	if !ok {
		cc.c.broken.Store(true)
	}
	if n > 0 {
		cc.c.wire.Add(n)
	}
	return cc.Conn.Write(p)
}

func (cc *countedConn) NetConn() net.Conn { return cc.Conn }

func (cc *countedConn) SyscallConn() (syscall.RawConn, error) {
	if s, ok := cc.Conn.(syscall.Conn); ok {
		return s.SyscallConn()
	}
	return nil, syscall.EINVAL
}

// respScanner follows a stream of RESP commands (arrays of bulk strings,
// the only form clients send) across writes.
type respScanner struct {
	state  uint8
	num    int64
	elems  int64
	skip   int64
	broken bool
}

const (
	rsArray    = iota // expecting '*'
	rsArrayLen        // digits of the element count
	rsBulk            // expecting '$'
	rsBulkLen         // digits of the bulk length
	rsBody            // skipping the bulk and its CRLF
)

// scan consumes p and returns how many commands it completed; false once
// the stream is not what it expects.
func (s *respScanner) scan(p []byte) (int64, bool) {
	if s.broken {
		return 0, false
	}
	var done int64
	for i := 0; i < len(p); {
		b := p[i]
		switch s.state {
		case rsArray:
			if b != '*' {
				s.broken = true
				return done, false
			}
			s.state, s.num = rsArrayLen, 0
		case rsArrayLen, rsBulkLen:
			switch {
			case b >= '0' && b <= '9':
				s.num = s.num*10 + int64(b-'0')
			case b == '\r':
			case b == '\n':
				if s.state == rsArrayLen {
					s.elems = s.num
					if s.elems <= 0 {
						done++
						s.state = rsArray
					} else {
						s.state = rsBulk
					}
				} else {
					s.skip, s.state = s.num+2, rsBody
				}
			default:
				s.broken = true
				return done, false
			}
		case rsBulk:
			if b != '$' {
				s.broken = true
				return done, false
			}
			s.state, s.num = rsBulkLen, 0
		case rsBody:
			n := min(s.skip, int64(len(p)-i))
			s.skip -= n
			i += int(n)
			if s.skip == 0 {
				s.elems--
				if s.elems == 0 {
					done++
					s.state = rsArray
				} else {
					s.state = rsBulk
				}
			}
			continue
		}
		i++
	}
	return done, true
}
