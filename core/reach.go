package core

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A call made with no connection and unanswered after probeAfter dials the
// server once (probeTimeout), the answer shared for probeValid.
// See docs/internals.md, "Probing a server that refuses connections".
const (
	probeAfter   = 100 * time.Millisecond
	probeTimeout = 200 * time.Millisecond
	probeValid   = 250 * time.Millisecond
)

// prober dials the deployment for a slow call: a plain client's server, a
// Sentinel client's master (and sentinels, if given), a Cluster's seeds until
// first reached; nothing for a Redlock node.
type prober struct {
	dial func(ctx context.Context) error // nil: no probing
	// idle reports whether a call now is watched: the client has no connection
	idle func() bool

	mu   sync.Mutex
	busy chan struct{} // closed when the dial in flight ends
	err  error         // the last dial's answer
	at   time.Time     // when it came
}

// newProber makes c's prober; reached reports whether the Locker has had an
// answer, sentinels are WithSentinelAddrs's, clock is the Locker's (ns).
func newProber(c redis.UniversalClient, reached func() bool, sentinels []string, clock func() int64) *prober {
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		if o.Dialer == nil {
			return &prober{}
		}
		master := func(ctx context.Context) error {
			conn, err := o.Dialer(ctx, o.Network, o.Addr)
			if err != nil {
				return err
			}
			return conn.Close()
		}
		dial := master
		if len(sentinels) > 0 {
			tcp := (&net.Dialer{Timeout: o.DialTimeout}).DialContext
			dial = func(ctx context.Context) error {
				if err := dialAny(ctx, tcp, sentinels, "sentinel"); err != nil {
					return err
				}
				return master(ctx)
			}
		}
		return &prober{dial: dial, idle: poolIdle(c, clock)}
	case *redis.ClusterClient:
		o := c.Options()
		if reflect.ValueOf(o.NewClient).Pointer() != reflect.ValueOf(redis.NewClient).Pointer() {
			// It may dial nodes elsewhere than their addresses (a proxy), so the
			// seeds say nothing. (go-redis sets redis.NewClient by default.)
			return &prober{}
		}
		dial := o.Dialer
		if dial == nil {
			dial = (&net.Dialer{Timeout: o.DialTimeout}).DialContext
		}
		return &prober{
			dial: func(ctx context.Context) error { return dialAny(ctx, dial, o.Addrs, "seed") },
			// not PoolStats: without a slot map it loads one, dialling every seed
			idle: func() bool { return !reached() },
		}
	}
	return &prober{}
}

// idleFresh is how long poolIdle's answer stands (reading stats locks, allocates).
const idleFresh = time.Millisecond

// poolIdle reports whether c has no connection, per pool stats at most
// idleFresh old; a call in that stretch after the pool emptied is not probed.
func poolIdle(c *redis.Client, clock func() int64) func() bool {
	var at atomic.Int64 // when the stats were last read (clock), +1 (0: never)
	var idle atomic.Bool
	return func() bool {
		now := clock() + 1
		if last := at.Load(); last != 0 && now-last < int64(idleFresh) {
			return idle.Load()
		}
		v := c.PoolStats().TotalConns == 0
		idle.Store(v)
		at.Store(now)
		return v
	}
}

type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// dialAny dials every address at once: nil as soon as one accepts, else the
// first failure, saying that all addresses (of kind what) failed.
func dialAny(ctx context.Context, dial dialFunc, addrs []string, what string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(addrs))
	for _, addr := range addrs {
		go func() {
			conn, err := dial(ctx, "tcp", addr)
			if err == nil {
				conn.Close()
			}
			errs <- err
		}()
	}
	var first error
	accepted := false
	for range addrs { // every dial ends before dialAny returns
		err := <-errs
		switch {
		case err == nil && !accepted:
			accepted = true
			cancel() // the others need not finish
		case err != nil && first == nil:
			first = err
		}
	}
	if accepted {
		return nil
	}
	if len(addrs) > 1 {
		return fmt.Errorf("all %d %s addresses: %w", len(addrs), what, first)
	}
	return fmt.Errorf("%s address: %w", what, first)
}

// watches reports whether a call now is to be watched by a probe.
func (p *prober) watches() bool { return p.dial != nil && p.idle() }

// probeError is a probe's refused dial ending a call in flight: unlike the
// call's own failed dial, it does not mean the call never ran.
type probeError struct{ err error }

func (e *probeError) Error() string { return e.err.Error() + " (a probe dial, while the call waited)" }
func (e *probeError) Unwrap() error { return e.err }

// refused returns the probe dial's error (nil: the server accepts), reusing an
// answer younger than probeValid or waiting for the dial in flight. spawn runs
// the dial on a tracked goroutine; false while closing.
func (p *prober) refused(ctx context.Context, spawn func(func()) bool) error {
	p.mu.Lock()
	if !p.at.IsZero() && time.Since(p.at) < probeValid {
		err := p.err
		p.mu.Unlock()
		return refusal(err)
	}
	if p.busy == nil {
		busy := make(chan struct{})
		p.busy = busy
		if !spawn(func() {
			dctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
			err := p.dial(dctx)
			cancel()
			p.mu.Lock()
			p.err, p.at, p.busy = err, time.Now(), nil
			p.mu.Unlock()
			close(busy)
		}) {
			p.busy = nil
			p.mu.Unlock()
			return nil
		}
	}
	busy := p.busy
	p.mu.Unlock()
	select {
	case <-busy:
	case <-ctx.Done():
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return refusal(p.err)
}

// refusal is a *probeError for a dial error that says the server takes no
// connections, else nil (a timeout says only that the machine is slow).
func refusal(err error) error {
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) || !dialFailed(err) {
		return nil
	}
	return &probeError{err}
}

func isProbe(err error) bool {
	var pe *probeError
	return errors.As(err, &pe)
}
