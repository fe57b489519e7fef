package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster timings.
const (
	// ClusterNodeTimeout is the cluster-node-timeout of every node: how long
	// a node may be unreachable before the others flag it as failing. Short
	// so that fault tests see a failing cluster quickly, long enough not to
	// flap on a busy machine under -race.
	ClusterNodeTimeout = 2 * time.Second

	// clusterReadyTimeout bounds how long the nodes of a new cluster may
	// take to agree on one healthy slot map.
	clusterReadyTimeout = 20 * time.Second

	// clusterSlots is the number of hash slots of Redis Cluster.
	clusterSlots = 16384
)

// Cluster is a Redis Cluster of masters without replicas, each a Server on
// a free loopback port with its cluster bus on another free port. The slots
// are split evenly in node order: Servers[0] serves the lowest range.
type Cluster struct {
	// Addrs are the nodes' host:port addresses, in the order of Servers.
	Addrs []string
	// Servers are the nodes. Stop, Restart, Pause and Resume act on one
	// node; a restarted node keeps its identity and slots (its cluster
	// config file survives in its Dir) but no data.
	Servers []*Server
	// Replicas are the masters' replicas, Replicas[i] of Servers[i], once
	// AddReplicas has started them.
	Replicas []*Server

	ranges [][2]int // slot range first served by Servers[i]
	buses  []int    // cluster bus port of Servers[i]

	mu    sync.Mutex
	moved map[int]int // slot → the index of the server MigrateSlot moved it to
}

// NewCluster starts a cluster of masters nodes (at least 3, as Redis
// requires for failure detection by majority), assigns the slots, joins the
// nodes and waits until every node reports cluster_state:ok and the same
// slot map. The caller must Close it; in tests prefer StartCluster. It fails
// with ErrNoRedis when redis-server is missing, or when the cluster is not
// ready within 20s.
func NewCluster(masters int) (*Cluster, error) {
	if masters < 3 {
		return nil, fmt.Errorf("redistest: a cluster needs at least 3 masters, got %d", masters)
	}
	c := &Cluster{}
	for i := 0; i < masters; i++ {
		s, bus, err := newClusterNode()
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Servers, c.buses = append(c.Servers, s), append(c.buses, bus)
		c.Addrs = append(c.Addrs, s.Addr)
		c.ranges = append(c.ranges, [2]int{i * clusterSlots / masters, (i+1)*clusterSlots/masters - 1})
	}
	if err := c.form(); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.WaitReady(clusterReadyTimeout); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// StartCluster is NewCluster for a test: it fails tb when the cluster
// cannot start and closes it in tb.Cleanup.
func StartCluster(tb testing.TB, masters int) *Cluster {
	tb.Helper()
	c, err := NewCluster(masters)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// AddReplicas starts one replica for every master (Replicas[i] replicates
// Servers[i]), joins them to the cluster and waits, for at most timeout,
// until every replica's link to its master is up and the masters report
// it. Cluster clients keep sending to the masters; WAIT on a master counts
// its replica.
func (c *Cluster) AddReplicas(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, m := range c.Servers {
		r, bus, err := newClusterNode()
		if err != nil {
			return err
		}
		c.Replicas = append(c.Replicas, r)
		mc := nodeClient(m)
		id, err := mc.Do(ctx, "cluster", "myid").Text()
		if err == nil {
			err = mc.Do(ctx, "cluster", "meet", "127.0.0.1", r.Port, bus).Err()
		}
		mc.Close()
		if err != nil {
			return fmt.Errorf("redistest: cluster replica for %s: %w", m.Addr, err)
		}
		rc := nodeClient(r)
		// The replica must know the master's node ID (gossip) before it
		// can replicate it.
		err = poll(ctx, func() error { return rc.Do(ctx, "cluster", "replicate", id).Err() })
		rc.Close()
		if err != nil {
			return fmt.Errorf("redistest: cluster replicate %s: %w", m.Addr, err)
		}
	}
	deadline, _ := ctx.Deadline()
	for _, r := range c.Replicas {
		if err := waitReplica(r, max(time.Until(deadline), time.Millisecond)); err != nil {
			return err
		}
	}
	return nil
}

// KillMaster kills the master Servers[i] (SIGKILL, as a crash would),
// without waiting for its replica to catch up, and waits until the replica
// (Replicas[i], started by AddReplicas) reports role master and every node
// is ready again (WaitReady); then it swaps Servers[i] and Replicas[i]
// (Addrs[i] follows): Servers[i] serves the slots again, Replicas[i] is the
// dead former master.
// The other masters flag the node failing after ClusterNodeTimeout and the
// replica is elected about a second later, so this takes some seconds; at
// most timeout. Writes the replica had not received are lost, as in a real
// crash. Errors: no such master or no replica for it, or the timeout.
func (c *Cluster) KillMaster(i int, timeout time.Duration) error {
	if i < 0 || i >= len(c.Servers) || i >= len(c.Replicas) {
		return fmt.Errorf("redistest: kill master %d: no such master with a replica (AddReplicas)", i)
	}
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	c.Servers[i].Stop()
	rc := nodeClient(c.Replicas[i])
	err := poll(ctx, func() error {
		if role := infoField(ctx, rc, "role"); role != "master" {
			return fmt.Errorf("replica %s has role %q", c.Replicas[i].Addr, role)
		}
		return nil
	})
	rc.Close()
	if err != nil {
		return fmt.Errorf("redistest: no failover within %v after master %s was killed: %w", timeout, c.Addrs[i], err)
	}
	c.Servers[i], c.Replicas[i] = c.Replicas[i], c.Servers[i]
	c.Addrs[i] = c.Servers[i].Addr
	return c.WaitReady(max(time.Until(deadline), time.Millisecond))
}

// newClusterNode starts one cluster-enabled server. The bus port is chosen
// free rather than port+10000, which may be beyond 65535; when it is taken
// before redis-server binds it, another is tried.
func newClusterNode() (*Server, int, error) {
	var lastErr error
	for try := 0; try < 3; try++ {
		bus, err := FreePort()
		if err != nil {
			return nil, 0, err
		}
		s, err := NewServer(
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", // relative to --dir: the server's own directory
			"--cluster-node-timeout", strconv.FormatInt(ClusterNodeTimeout.Milliseconds(), 10),
			"--cluster-port", strconv.Itoa(bus),
		)
		if err == nil {
			return s, bus, nil
		}
		lastErr = err
	}
	return nil, 0, lastErr
}

// form gives every node a distinct config epoch and its slot range, then
// introduces every node to the first one; gossip does the rest.
func (c *Cluster) form() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := nodeClient(c.Servers[0])
	defer first.Close()
	for i, s := range c.Servers {
		nc := nodeClient(s)
		err := nc.Do(ctx, "cluster", "set-config-epoch", i+1).Err()
		if err == nil {
			err = nc.Do(ctx, "cluster", "addslotsrange", c.ranges[i][0], c.ranges[i][1]).Err()
		}
		nc.Close()
		if err != nil {
			return fmt.Errorf("redistest: cluster node %s: %w", s.Addr, err)
		}
		if i == 0 {
			continue
		}
		if err := first.Do(ctx, "cluster", "meet", "127.0.0.1", s.Port, c.buses[i]).Err(); err != nil {
			return fmt.Errorf("redistest: cluster meet %s: %w", s.Addr, err)
		}
	}
	return nil
}

// nodeClient is a plain client to one node with short timeouts.
func nodeClient(s *Server) *redis.Client {
	o := s.Options()
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
	return redis.NewClient(o)
}

// WaitReady polls every master, for at most timeout, until each reports
// cluster_state:ok, knows all nodes (replicas included), and maps every
// slot range to the node it was assigned to. Use it after restarting or
// resuming a node. The error names the first node found not ready and why.
func (c *Cluster) WaitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	clients := make([]*redis.Client, len(c.Servers))
	for i, s := range c.Servers {
		clients[i] = nodeClient(s)
		defer clients[i].Close()
	}
	err := poll(ctx, func() error {
		for i, nc := range clients {
			if err := c.nodeReady(ctx, nc); err != nil {
				return fmt.Errorf("node %s: %w", c.Servers[i].Addr, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redistest: cluster not ready within %v: %w", timeout, err)
	}
	return nil
}

// nodeReady checks one node's view of the cluster.
func (c *Cluster) nodeReady(ctx context.Context, nc *redis.Client) error {
	info, err := nc.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	if fields["cluster_state"] != "ok" {
		return fmt.Errorf("cluster_state:%s", fields["cluster_state"])
	}
	if n, all := fields["cluster_known_nodes"], len(c.Servers)+len(c.Replicas); n != strconv.Itoa(all) {
		return fmt.Errorf("knows %s nodes of %d", n, all)
	}
	//lint:ignore SA1019 CLUSTER SLOTS answers on every Redis 7 and is all this check needs
	slots, err := nc.ClusterSlots(ctx).Result()
	if err != nil {
		return err
	}
	covered := 0
	for _, sl := range slots {
		for slot := sl.Start; slot <= sl.End; slot++ {
			i := c.owner(slot)
			if i < 0 || len(sl.Nodes) == 0 || sl.Nodes[0].Addr != c.Addrs[i] {
				return fmt.Errorf("slot %d on %v, want %s", slot, sl.Nodes, c.Addrs[max(i, 0)])
			}
		}
		covered += sl.End - sl.Start + 1
	}
	if covered != clusterSlots {
		return fmt.Errorf("reports %d of %d slots", covered, clusterSlots)
	}
	return nil
}

// owner is the index of the server that serves slot, or -1 for a slot out
// of range.
func (c *Cluster) owner(slot int) int {
	c.mu.Lock()
	i, ok := c.moved[slot]
	c.mu.Unlock()
	if ok {
		return i
	}
	for i, r := range c.ranges {
		if slot >= r[0] && slot <= r[1] {
			return i
		}
	}
	return -1
}

// ServerForSlot returns the node serving slot (0..16383), or nil for a slot
// out of range. Find a key's slot with the CLUSTER KEYSLOT command
// (ClusterClient.ClusterKeySlot).
func (c *Cluster) ServerForSlot(slot int) *Server {
	if i := c.owner(slot); i >= 0 {
		return c.Servers[i]
	}
	return nil
}

// MigrateSlot moves slot (0..16383) and its keys from the master that
// serves it to Servers[to], as resharding does while clients work: the
// slot IMPORTING on the target and MIGRATING on the source, its keys moved
// in batches with MIGRATE (clients follow ASK and TRYAGAIN meanwhile), then
// the slot given to the target on every master (clients follow MOVED; the
// source unsubscribes its clients from the slot's shard channels). It
// returns once every node agrees (WaitReady), within timeout. Moving a slot
// to the master that serves it does nothing.
func (c *Cluster) MigrateSlot(slot, to int, timeout time.Duration) error {
	from := c.owner(slot)
	if from < 0 || to < 0 || to >= len(c.Servers) {
		return fmt.Errorf("redistest: migrate slot %d to node %d: out of range", slot, to)
	}
	if from == to {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	src, dst := nodeClient(c.Servers[from]), nodeClient(c.Servers[to])
	defer src.Close()
	defer dst.Close()
	srcID, err := src.Do(ctx, "cluster", "myid").Text()
	if err != nil {
		return fmt.Errorf("redistest: migrate slot %d: %w", slot, err)
	}
	dstID, err := dst.Do(ctx, "cluster", "myid").Text()
	if err == nil {
		err = dst.Do(ctx, "cluster", "setslot", slot, "importing", srcID).Err()
	}
	if err == nil {
		err = src.Do(ctx, "cluster", "setslot", slot, "migrating", dstID).Err()
	}
	for err == nil {
		var keys []string
		keys, err = src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil || len(keys) == 0 {
			break
		}
		args := []any{"migrate", "127.0.0.1", c.Servers[to].Port, "", 0, 5000, "replace", "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		err = src.Do(ctx, args...).Err()
	}
	// The target first, then the source (which then stops answering for
	// the slot), then the others; gossip would spread it too.
	for _, i := range append([]int{to, from}, c.others(from, to)...) {
		if err != nil {
			break
		}
		nc := nodeClient(c.Servers[i])
		err = nc.Do(ctx, "cluster", "setslot", slot, "node", dstID).Err()
		nc.Close()
	}
	if err != nil {
		return fmt.Errorf("redistest: migrate slot %d from %s to %s: %w", slot, c.Addrs[from], c.Addrs[to], err)
	}
	c.mu.Lock()
	if c.moved == nil {
		c.moved = map[int]int{}
	}
	c.moved[slot] = to
	c.mu.Unlock()
	deadline, _ := ctx.Deadline()
	return c.WaitReady(max(time.Until(deadline), time.Millisecond))
}

// others lists the indexes of the servers but a and b.
func (c *Cluster) others(a, b int) []int {
	var out []int
	for i := range c.Servers {
		if i != a && i != b {
			out = append(out, i)
		}
	}
	return out
}

// Options returns go-redis cluster options for all nodes with short
// timeouts (1s), so that fault tests fail fast. Redirects (MOVED, ASK) are
// followed up to go-redis's default of 3.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:        append([]string(nil), c.Addrs...),
		DialTimeout:  clientTimeout,
		ReadTimeout:  clientTimeout,
		WriteTimeout: clientTimeout,
		MaxRetries:   -1,
	}
}

// Client returns a cluster client (see Options), closed in tb.Cleanup.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	cc := redis.NewClusterClient(c.Options())
	tb.Cleanup(func() { cc.Close() })
	return cc
}

// Close stops every node and removes their directories.
func (c *Cluster) Close() error {
	var errs []error
	for _, s := range append(append([]*Server(nil), c.Replicas...), c.Servers...) {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
