package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/redistest"
)

// env is the Redis side of a run: three independent redis-servers on
// loopback, started for the run (single-server configurations use the
// first; Redlock configurations use all three), a Redis Cluster of three
// masters when a configuration runs on one, and a plain client on each
// server and master for PING and INFO.
type env struct {
	servers []*redistest.Server
	stats   []*redis.Client
	cluster *redistest.Cluster
	// clusterStats: a plain client on each of the Cluster's masters
	clusterStats []*redis.Client
	// useCluster: the clients a configuration makes (client) are the
	// Cluster's (see onCluster)
	useCluster bool
}

const nServers = 3

// clusterMasters is the size of the Cluster configurations run on.
const clusterMasters = 3

func startEnv(withCluster bool) (*env, error) {
	e := &env{}
	for range nServers {
		s, err := redistest.NewServer()
		if err != nil {
			e.close()
			return nil, err
		}
		e.servers = append(e.servers, s)
		e.stats = append(e.stats, statsClient(s.Addr))
	}
	if withCluster {
		cl, err := redistest.NewCluster(clusterMasters)
		if err != nil {
			e.close()
			return nil, fmt.Errorf("cluster: %w", err)
		}
		e.cluster = cl
		for _, s := range cl.Servers {
			e.clusterStats = append(e.clusterStats, statsClient(s.Addr))
		}
	}
	return e, nil
}

func statsClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2})
}

func (e *env) close() {
	for _, c := range append(e.stats, e.clusterStats...) {
		c.Close()
	}
	for _, s := range e.servers {
		s.Close()
	}
	if e.cluster != nil {
		e.cluster.Close()
	}
}

// of is the servers p runs on, as their INFO clients: the first
// p.servers, or the Cluster's masters.
func (e *env) of(p peer) []*redis.Client {
	if p.cluster {
		return e.clusterStats
	}
	return e.stats[:p.servers]
}

func (e *env) addr(i int) string { return e.servers[i].Addr }

// newClient is the go-redis client every go-redis-based configuration gets:
// the same options for all (a pool with room for 64 callers, and
// ContextTimeoutEnabled, lockgate's recommended setting, which only makes
// go-redis honour context deadlines), instrumented with cnt when not nil.
func newClient(addr string, cnt *counters) *redis.Client {
	return newClientWith(addr, cnt, true)
}

// newClusterClient is newClient's Cluster client, on the run's Cluster.
func newClusterClient(e *env, cnt *counters) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: e.cluster.Addrs, PoolSize: 80, ContextTimeoutEnabled: true})
	cnt.instrumentCluster(c)
	return c
}

// newClientWith is newClient with ContextTimeoutEnabled as given.
func newClientWith(addr string, cnt *counters, ctxTimeout bool) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 80, ContextTimeoutEnabled: ctxTimeout})
	cnt.instrument(c)
	return c
}

// reset empties every server (FLUSHALL SYNC) and collects the process's
// garbage, before a run and outside its measurement, so that no run pays
// for what an earlier one left behind (keys that would expire during it,
// garbage to collect).
func (e *env) reset(ctx context.Context) error {
	for _, c := range append(e.stats, e.clusterStats...) {
		if err := c.Do(ctx, "FLUSHALL", "SYNC").Err(); err != nil {
			return err
		}
	}
	runtime.GC()
	return nil
}

// keys is the number of keys on the servers cs.
func (e *env) keys(ctx context.Context, cs []*redis.Client) (int64, error) {
	var total int64
	for _, c := range cs {
		k, err := c.DBSize(ctx).Result()
		if err != nil {
			return 0, err
		}
		total += k
	}
	return total, nil
}

// redisVersion is redis_version from INFO server of the first server.
func (e *env) redisVersion(ctx context.Context) string {
	info, err := e.stats[0].Info(ctx, "server").Result()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return v
		}
	}
	return "unknown"
}

// rtt is the median round trip of 101 PINGs to the first server.
func (e *env) rtt(ctx context.Context) time.Duration {
	d := make([]time.Duration, 101)
	for i := range d {
		t0 := time.Now()
		e.stats[0].Ping(ctx)
		d[i] = time.Since(t0)
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// cmdStats is INFO commandstats: calls per command name, summed over the
// servers read. Commands a script runs are counted by Redis too (a script
// that runs SET and DEL adds evalsha, set and del).
type cmdStats map[string]int64

// commandStats reads the calls of INFO commandstats of the servers cs.
func (e *env) commandStats(ctx context.Context, cs []*redis.Client) (cmdStats, error) {
	return e.commandField(ctx, cs, "calls")
}

// commandUsec reads the usec of INFO commandstats of the servers cs: a
// script's covers the commands it runs, which count their own too.
func (e *env) commandUsec(ctx context.Context, cs []*redis.Client) (cmdStats, error) {
	return e.commandField(ctx, cs, "usec")
}

// commandField reads one field of INFO commandstats per command, summed
// over the servers cs.
func (e *env) commandField(ctx context.Context, cs []*redis.Client, field string) (cmdStats, error) {
	out := cmdStats{}
	for _, c := range cs {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(info, "\r\n") {
			// cmdstat_evalsha:calls=12,usec=40,usec_per_call=3.33,...
			name, rest, ok := strings.Cut(line, ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") {
				continue
			}
			for _, kv := range strings.Split(rest, ",") {
				if val, ok := strings.CutPrefix(kv, field+"="); ok {
					v, err := strconv.ParseInt(val, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("commandstats line %q: %w", line, err)
					}
					out[strings.TrimPrefix(name, "cmdstat_")] += v
				}
			}
		}
	}
	return out, nil
}

// scriptCommands are the commands whose usec covers the commands they run.
var scriptCommands = []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}

// serverTime is the servers' time (µs) of the commands a client sent:
// its scripts' usec and that of the commands it sends outside scripts
// (topLevel), from a delta of commandUsec.
func (usec cmdStats) serverTime(topLevel []string) int64 {
	var t int64
	for _, name := range append(slices.Clone(scriptCommands), topLevel...) {
		t += usec[name]
	}
	return t
}

// delta is after − before, without INFO (the harness's own reads).
func (after cmdStats) delta(before cmdStats) cmdStats {
	d := cmdStats{}
	for k, v := range after {
		if k == "info" {
			continue
		}
		if n := v - before[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

func (s cmdStats) total() int64 {
	var n int64
	for _, v := range s {
		n += v
	}
	return n
}

// top returns the n most called commands, most first.
func (s cmdStats) top(n int) []string {
	names := make([]string, 0, len(s))
	for k := range s {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if s[names[i]] != s[names[j]] {
			return s[names[i]] > s[names[j]]
		}
		return names[i] < names[j]
	})
	return names[:min(n, len(names))]
}
