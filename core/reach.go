package core

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A server that refuses connections is not answered quickly by the client:
// go-redis dials again (DialerRetries, 5 by default, 100ms apart) and sends
// again a call that never reached the server (MaxRetries, 3), so such a
// call takes seconds and, cut short by its budget, could not say why. A
// call not answered within probeAfter therefore asks whether the server
// accepts connections at all: one dial, as the client dials (its own
// Dialer), at most one at a time per Locker, its answer shared for
// probeValid. A refused dial ends the call at once with that error, and
// the call itself is stopped (its context cancelled); whatever it did, if
// it ran after all, is undone as for any late call. Only calls made while
// the client has no connection are watched: the first call after an outage
// begins may still find dead pooled connections and take its budget.
const (
	probeAfter   = 100 * time.Millisecond
	probeTimeout = 200 * time.Millisecond
	probeValid   = 250 * time.Millisecond
)

// prober dials the deployment on behalf of a slow call: a plain client's
// server; a Sentinel failover client's master, through its sentinels (as
// the client dials), after dialling the sentinels themselves when the
// Locker was told their addresses (WithSentinelAddrs); a Cluster client's
// seed addresses, until the Locker first reaches the Cluster (after that a
// refused node is a failover's, which the client's own errors and
// failingOver handle). A Redlock node has none. Without the sentinels'
// addresses, a failover client whose sentinels all refuse is not told apart
// in time: go-redis keeps them to itself, dials each with its retries and
// asks them one call at a time, so a probe through the client's dialer
// waits behind the call it probes for; such a call ends with its budget.
type prober struct {
	dial func(ctx context.Context) error // nil: no probing
	// idle reports whether a call now is to be watched: the client has no
	// connection to its server (a call then dials; a call on a live
	// connection costs no timer)
	idle func() bool

	mu   sync.Mutex
	busy chan struct{} // closed when the dial in flight ends
	err  error         // the last dial's answer
	at   time.Time     // when it came
}

// newProber makes the prober of client c; reached reports whether the
// Locker has had an answer from the deployment; sentinels are the
// addresses of a failover client's sentinels, if the Locker was told them.
func newProber(c redis.UniversalClient, reached func() bool, sentinels []string) *prober {
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
			tcp := tcpDialer(nil, o.DialTimeout)
			dial = func(ctx context.Context) error {
				if err := dialAny(ctx, tcp, sentinels, "sentinel"); err != nil {
					return err
				}
				return master(ctx)
			}
		}
		return &prober{dial: dial, idle: func() bool { return c.PoolStats().TotalConns == 0 }}
	case *redis.ClusterClient:
		o := c.Options()
		if reflect.ValueOf(o.NewClient).Pointer() != reflect.ValueOf(redis.NewClient).Pointer() {
			// It may dial each node elsewhere than its address (a port
			// forward, a proxy): the seeds' addresses say nothing. (go-redis
			// sets redis.NewClient when the options name none.)
			return &prober{}
		}
		dial := tcpDialer(o.Dialer, o.DialTimeout)
		return &prober{
			dial: func(ctx context.Context) error { return dialAny(ctx, dial, o.Addrs, "seed") },
			// (not PoolStats: a Cluster client without a slot map loads
			// it there, dialling every seed with its retries)
			idle: func() bool { return !reached() },
		}
	}
	return &prober{}
}

type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// tcpDialer is dial, or, when nil, a TCP dial within timeout.
func tcpDialer(dial dialFunc, timeout time.Duration) dialFunc {
	if dial != nil {
		return dial
	}
	d := &net.Dialer{Timeout: timeout}
	return d.DialContext
}

// dialAny dials every address at once: nil as soon as one accepts, else
// the first failure, saying that every address (of the kind what names)
// failed.
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

// probeError is a probe's failed dial, ending a call that was still in
// flight: unlike the call's own failed dial it does not say that the call
// never ran.
type probeError struct{ err error }

func (e *probeError) Error() string { return e.err.Error() + " (a probe dial, while the call waited)" }
func (e *probeError) Unwrap() error { return e.err }

// refused dials the server (or takes a dial answered within probeValid, or
// waits for the one in flight) and returns the dial's error, nil when the
// server accepts connections. spawn runs the dial on a goroutine the Locker
// tracks; false when it is closing.
func (p *prober) refused(ctx context.Context, spawn func(func()) bool) error {
	if p.dial == nil {
		return nil
	}
	p.mu.Lock()
	if !p.at.IsZero() && time.Since(p.at) < probeValid {
		err := p.err
		p.mu.Unlock()
		if refusal(err) {
			return &probeError{err}
		}
		return nil
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
	if !refusal(p.err) {
		return nil
	}
	return &probeError{p.err}
}

// refusal reports whether a probe's dial error says the server does not
// take connections (refused, no route, the name unknown); a dial that
// timed out says only that the machine is slow, and the call goes on.
func refusal(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return dialFailed(err)
}

func isProbe(err error) bool {
	var pe *probeError
	return errors.As(err, &pe)
}
