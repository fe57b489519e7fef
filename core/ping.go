package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Ping checks that the Locker can use its deployment, as at start-up: it
// reaches every node it uses (master, Cluster masters, Redlock nodes) within
// ctx's deadline or the attempt timeout, whichever is first, and checks each
// server as the first lock does (an eviction policy other than noeviction is
// logged). Errors: ErrUnavailable joining a *NodeError (address, cause) per
// node that did not answer; ErrUnsupported for a server older than 7.0;
// ErrClosed after Close.
// See docs/topologies.md, "Requirements, whatever the topology".
func (l *Locker) Ping(ctx context.Context) error {
	if l.closed.Load() {
		return ErrClosed
	}
	nodes := l.nodes(ctx)
	errs := make([]error, len(nodes))
	facts := make([]serverFacts, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			f, err := bounded(l, ctx, l.callDeadline(ctx), func(cctx context.Context) (serverFacts, error) {
				return n.check(cctx)
			}, nil)
			facts[i], errs[i] = f, withCause(err)
		})
	}
	wg.Wait()
	var failed []error
	for i, err := range errs {
		switch {
		case err == ErrClosed:
			return err
		case err != nil:
			failed = append(failed, &NodeError{Node: nodes[i].name, Err: err})
			continue
		}
		if unsupported := l.judge(ctx, facts[i], slog.String("node", nodes[i].name)); unsupported != nil {
			return fmt.Errorf("%w (node %s)", unsupported, nodes[i].name)
		}
	}
	if len(failed) > 0 {
		return unavailable("ping", errors.Join(failed...))
	}
	return nil
}

// pingNode is one node Ping reaches: its address and how to read its facts.
type pingNode struct {
	name  string
	check func(ctx context.Context) (serverFacts, error)
}

// nodes are the nodes Ping reaches; a Cluster's are its masters.
func (l *Locker) nodes(ctx context.Context) []pingNode {
	var ns []pingNode
	for _, c := range l.be.clients() {
		if cc, ok := c.c.(*redis.ClusterClient); ok {
			ns = append(ns, clusterNodes(ctx, l, cc)...)
			continue
		}
		ns = append(ns, clientNode(c.name, c.c))
	}
	return ns
}

// clusterNodes are a Cluster's masters from the client's slot map, loaded once
// if missing but never reloaded (a hung node could take the budget). A Cluster
// it cannot map is one node that says why.
func clusterNodes(ctx context.Context, l *Locker, cc *redis.ClusterClient) []pingNode {
	masters, err := bounded(l, ctx, l.callDeadline(ctx), func(cctx context.Context) ([]*redis.Client, error) {
		seen := map[string]bool{}
		var ms []*redis.Client
		for _, tag := range slotTags() {
			m, err := cc.MasterForKey(cctx, tag)
			if err != nil {
				return nil, err
			}
			if addr := m.Options().Addr; !seen[addr] {
				seen[addr] = true
				ms = append(ms, m)
			}
		}
		return ms, nil
	}, nil)
	if err != nil {
		return []pingNode{{name: "cluster", check: func(context.Context) (serverFacts, error) { return serverFacts{}, err }}}
	}
	ns := make([]pingNode, len(masters))
	for i, m := range masters {
		ns[i] = clientNode(m.Options().Addr, m)
	}
	return ns
}

// clientNode asks c's server.
func clientNode(name string, c redis.UniversalClient) pingNode {
	return pingNode{name: name, check: func(ctx context.Context) (serverFacts, error) { return readServer(ctx, c) }}
}
