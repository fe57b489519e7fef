package rig

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
)

// Resource is the protected resource of the rig: a store the workers write
// to under their locks, as a database row or a file would be. It records
// every write in the order it received them (one clock, one order: the
// oracle of the checker) and, fenced, rejects a write whose fence is lower
// than the highest it has accepted for the key — the fencing the README
// tells users to do. A semaphore's writes are recorded, never rejected:
// its holders write side by side, and no one fence orders them. It runs in the controller, which no fault touches.
//
// Protocol, one line each way per write over TCP:
//
//	W <key> <holder> <fence> <live 0|1>\n  →  A\n (accepted) | R\n (rejected)
type Resource struct {
	Addr   string
	fenced bool

	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	seq   int64
	max   map[string]int64
	log   []Write
	conns map[net.Conn]struct{}
}

// NewResource listens on a free loopback port.
func NewResource(fenced bool) (*Resource, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Resource{Addr: ln.Addr().String(), fenced: fenced, ln: ln, max: map[string]int64{}, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

func (r *Resource) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.conns[c] = struct{}{}
		r.mu.Unlock()
		r.wg.Add(1)
		go r.serve(c)
	}
}

func (r *Resource) serve(c net.Conn) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.conns, c)
		r.mu.Unlock()
		c.Close()
	}()
	rd := bufio.NewReader(c)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) != 5 || f[0] != "W" {
			fmt.Fprintf(c, "E\n")
			continue
		}
		fence, _ := strconv.ParseInt(f[3], 10, 64)
		if r.write(f[1], f[2], fence, f[4] == "1") {
			c.Write([]byte("A\n"))
		} else {
			c.Write([]byte("R\n"))
		}
	}
}

// write records one write and decides it.
func (r *Resource) write(key, holder string, fence int64, live bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	ok := !r.fenced || shared(key) || fence >= r.max[key]
	if ok && fence > r.max[key] {
		r.max[key] = fence
	}
	r.log = append(r.log, Write{Seq: r.seq, At: now(), Key: key, Holder: holder, Fence: fence, Live: live, Accepted: ok})
	return ok
}

// Count returns the number of writes received so far.
func (r *Resource) Count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq
}

// Writes returns a copy of the log so far.
func (r *Resource) Writes() []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Write(nil), r.log...)
}

// Close stops the resource and its connections.
func (r *Resource) Close() {
	r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// resourceClient is a worker's connection to the resource.
type resourceClient struct {
	addr string
	c    net.Conn
	rd   *bufio.Reader
}

// writeUnreached is a write's answer when it did not reach the resource.
const writeUnreached = "E"

// write sends one write: "A" accepted, "R" rejected, writeUnreached.
func (rc *resourceClient) write(key, holder string, fence int64, live bool) string {
	for try := 0; try < 2; try++ {
		if rc.c == nil {
			c, err := net.Dial("tcp", rc.addr)
			if err != nil {
				return writeUnreached
			}
			rc.c, rc.rd = c, bufio.NewReader(c)
		}
		l := "0"
		if live {
			l = "1"
		}
		if _, err := fmt.Fprintf(rc.c, "W %s %s %d %s\n", key, holder, fence, l); err == nil {
			if line, err := rc.rd.ReadString('\n'); err == nil {
				return strings.TrimSpace(line)
			}
		}
		rc.c.Close()
		rc.c = nil
	}
	return writeUnreached
}
