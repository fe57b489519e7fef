package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel timings.
const (
	// SentinelDownAfter is the sentinel's down-after-milliseconds: how long
	// the master may not answer before the sentinel deems it down and fails
	// over to the replica. Short so that fault tests fail over quickly, long
	// enough not to fail over by accident on a busy machine under -race.
	SentinelDownAfter = 2 * time.Second

	// sentinelFailoverTimeout is the sentinel's failover-timeout.
	sentinelFailoverTimeout = 6 * time.Second

	// sentinelReadyTimeout bounds how long the replica may take to sync and
	// the sentinel to report the master and its replica.
	sentinelReadyTimeout = 15 * time.Second
)

// SentinelMasterName is the name under which the sentinel monitors the
// master (Sentinel.MasterName).
const SentinelMasterName = "lockgate-master"

// Sentinel is a master Server, one replica of it, and sentinel processes
// watching them (one with quorum 1, or NewSentinels's n with a majority), all
// on free loopback ports. Clients find the
// master through the sentinel (redis.NewFailoverClient). A master that does
// not answer for SentinelDownAfter (stopped, or paused) is failed over to the
// replica by the sentinel on its own; Failover forces it.
type Sentinel struct {
	// MasterName is the monitored master's name, SentinelMasterName.
	MasterName string
	// SentinelAddrs are the sentinels' host:port addresses.
	SentinelAddrs []string
	// Master is the current master; Failover swaps it with Replica.
	Master *Server
	// Replica replicates Master. It is started with --replicaof the first
	// master, which a Restart repeats.
	Replica *Server

	sentinels []*Server // sentinel-mode processes (config file first on the command line)
}

// NewSentinel starts a master, its replica and a sentinel, and waits until
// the replica is in sync and the sentinel reports the master and the
// replica. The caller must Close it; in tests prefer StartSentinel. It fails
// with ErrNoRedis when redis-server is missing, or when the setup is not
// ready within 15s.
func NewSentinel() (*Sentinel, error) { return NewSentinels(1) }

// NewSentinels is NewSentinel with n sentinels (n ≥ 1) and quorum n/2+1,
// as a production deployment runs them (three is the usual): a master is
// failed over only when a majority agrees it is down. It also waits until
// every sentinel knows the others, so that a failover can be voted on.
func NewSentinels(n int) (*Sentinel, error) {
	if n < 1 {
		return nil, fmt.Errorf("redistest: %d sentinels", n)
	}
	s := &Sentinel{MasterName: SentinelMasterName}
	var err error
	s.Master, err = NewServer("--repl-diskless-sync-delay", "0")
	if err != nil {
		return nil, err
	}
	s.Replica, err = NewServer("--repl-diskless-sync-delay", "0",
		"--replicaof", "127.0.0.1", strconv.Itoa(s.Master.Port))
	if err == nil {
		err = waitReplica(s.Replica, sentinelReadyTimeout)
	}
	for i := 0; i < n && err == nil; i++ {
		var p *Server
		p, err = newSentinelProcess(s.MasterName, s.Master.Port, n/2+1)
		if p != nil {
			s.sentinels = append(s.sentinels, p)
			s.SentinelAddrs = append(s.SentinelAddrs, p.Addr)
		}
	}
	if err == nil {
		err = s.waitReported(sentinelReadyTimeout)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// StartSentinel is NewSentinel for a test: it fails tb when the setup
// cannot start and closes it in tb.Cleanup.
func StartSentinel(tb testing.TB) *Sentinel { return StartSentinels(tb, 1) }

// StartSentinels is NewSentinels for a test.
func StartSentinels(tb testing.TB, n int) *Sentinel {
	tb.Helper()
	s, err := NewSentinels(n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// Options returns go-redis failover options for the master name and the
// sentinels with short timeouts (1s) and no retries, so that fault tests
// fail fast.
func (s *Sentinel) Options() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:    s.MasterName,
		SentinelAddrs: append([]string(nil), s.SentinelAddrs...),
		DialTimeout:   clientTimeout,
		ReadTimeout:   clientTimeout,
		WriteTimeout:  clientTimeout,
		MaxRetries:    -1,
	}
}

// Client returns a failover client (redis.NewFailoverClient with Options)
// that follows the master the sentinels report, closed in tb.Cleanup.
func (s *Sentinel) Client(tb testing.TB) *redis.Client {
	c := redis.NewFailoverClient(s.Options())
	tb.Cleanup(func() { c.Close() })
	return c
}

// Sync waits, for at most timeout, until the replica has received every
// write the master had received when Sync was called. Replication is
// asynchronous, and right after a full sync the master may hold back the
// stream for up to a second (until the replica's first acknowledgement).
func (s *Sentinel) Sync(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	mc, rc := nodeClient(s.Master), nodeClient(s.Replica)
	defer mc.Close()
	defer rc.Close()
	want, err := strconv.ParseInt(infoField(ctx, mc, "master_repl_offset"), 10, 64)
	if err != nil {
		return fmt.Errorf("redistest: master %s replication offset: %w", s.Master.Addr, err)
	}
	err = poll(ctx, func() error {
		got, _ := strconv.ParseInt(infoField(ctx, rc, "master_repl_offset"), 10, 64)
		if got < want {
			return fmt.Errorf("replica %s at offset %d, master at %d", s.Replica.Addr, got, want)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redistest: replica not in sync within %v: %w", timeout, err)
	}
	return nil
}

// Failover reconciles Master and Replica with the sentinel (Reconcile),
// waits for the replica to have the master's writes (Sync), makes the
// sentinel promote it (SENTINEL FAILOVER, again while the sentinel answers
// that a failover is still under way), and waits until the sentinel
// reports it as the master and it reports role master; then it swaps
// Master and Replica. All of it takes at most timeout. Writes made during
// Failover may be lost, as in a real failover. The former master keeps
// acting as a master until the sentinel turns it into a replica, some
// seconds later (about 8s). Errors: the sentinel's last refusal (e.g. no
// good replica) when the timeout ends, or the timeout.
func (s *Sentinel) Failover(timeout time.Duration) error { return s.failover(timeout, true) }

// FailoverNow is Failover without waiting for the replica to catch up
// first: what the replica has not received when the sentinel promotes it is
// lost (an operator's SENTINEL FAILOVER while the replica lags).
func (s *Sentinel) FailoverNow(timeout time.Duration) error { return s.failover(timeout, false) }

func (s *Sentinel) failover(timeout time.Duration, sync bool) error {
	deadline := time.Now().Add(timeout)
	if err := s.Reconcile(time.Until(deadline)); err != nil {
		return err
	}
	if sync {
		if err := s.Sync(timeout); err != nil {
			return err
		}
	}
	sc := s.sentinelClient()
	defer sc.Close()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	// A failover still under way (the sentinel reconfiguring the old master
	// after a promotion) answers INPROG: wait for it to end, within timeout.
	err := poll(ctx, func() error { return sc.Failover(ctx, s.MasterName).Err() })
	if err != nil {
		return fmt.Errorf("redistest: SENTINEL FAILOVER: %w", err)
	}
	if err := s.waitPromoted(ctx, s.sentinels[:1]); err != nil {
		return fmt.Errorf("redistest: failover not done within %v: %w", timeout, err)
	}
	return nil
}

// Reconcile makes Master and Replica what the first sentinel reports now. A
// failover that ended after Failover or FailoverNow gave up waiting for it
// (its timeout), or one the sentinel started by itself (a master that did not
// answer for SentinelDownAfter), swapped the two in the deployment and not
// here; Failover reconciles first, and a caller that picks Master for a fault
// of its own does so too. It fails when the sentinel does not answer within
// timeout or reports neither server.
func (s *Sentinel) Reconcile(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sc := s.sentinelClient()
	defer sc.Close()
	addr, err := s.masterAddr(ctx, sc)
	switch {
	case err != nil:
		return fmt.Errorf("redistest: reconcile: %w", err)
	case addr == s.Replica.Addr:
		s.Master, s.Replica = s.Replica, s.Master
	case addr != s.Master.Addr:
		return fmt.Errorf("redistest: reconcile: the sentinel reports master %s, neither %s nor %s", addr, s.Master.Addr, s.Replica.Addr)
	}
	return nil
}

// waitPromoted waits until each of sentinels reports Replica as the master
// and Replica reports role master, then swaps Master and Replica.
func (s *Sentinel) waitPromoted(ctx context.Context, sentinels []*Server) error {
	rc := nodeClient(s.Replica)
	defer rc.Close()
	for _, p := range sentinels {
		sc := sentinelClient(p)
		err := poll(ctx, func() error {
			addr, err := s.masterAddr(ctx, sc)
			if err != nil {
				return err
			}
			if addr != s.Replica.Addr {
				return fmt.Errorf("sentinel %s reports master %s, want %s", p.Addr, addr, s.Replica.Addr)
			}
			return nil
		})
		sc.Close()
		if err != nil {
			return err
		}
	}
	err := poll(ctx, func() error {
		if role := infoField(ctx, rc, "role"); role != "master" {
			return fmt.Errorf("replica %s has role %q", s.Replica.Addr, role)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.Master, s.Replica = s.Replica, s.Master
	return nil
}

// KillMaster kills the master (SIGKILL, as a crash would), without waiting
// for the replica to catch up, and waits until every sentinel reports the
// replica as the master and it reports role master; then it swaps Master
// and Replica (Replica is then the dead former master: Restart brings it
// back empty, as a replica of the first master's address). The sentinels
// notice after SentinelDownAfter, so this takes some seconds; at most
// timeout. Writes the replica had not received are lost, as in a real
// crash.
func (s *Sentinel) KillMaster(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s.Master.Stop()
	if err := s.waitPromoted(ctx, s.sentinels); err != nil {
		return fmt.Errorf("redistest: no failover within %v after the master was killed: %w", timeout, err)
	}
	return nil
}

// Close stops the sentinel, the replica and the master and removes their
// directories.
func (s *Sentinel) Close() error {
	var errs []error
	for _, p := range s.sentinels {
		errs = append(errs, p.Close())
	}
	for _, srv := range []*Server{s.Replica, s.Master} {
		if srv != nil {
			errs = append(errs, srv.Close())
		}
	}
	return errors.Join(errs...)
}

// sentinelClient is a client to the first sentinel with short timeouts.
func (s *Sentinel) sentinelClient() *redis.SentinelClient { return sentinelClient(s.sentinels[0]) }

func sentinelClient(p *Server) *redis.SentinelClient {
	o := p.Options()
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
	return redis.NewSentinelClient(o)
}

func (s *Sentinel) masterAddr(ctx context.Context, sc *redis.SentinelClient) (string, error) {
	a, err := sc.GetMasterAddrByName(ctx, s.MasterName).Result()
	if err != nil {
		return "", err
	}
	if len(a) != 2 {
		return "", fmt.Errorf("unexpected master address %q", a)
	}
	return net.JoinHostPort(a[0], a[1]), nil
}

// waitReported polls every sentinel until it reports Master as the master
// and Replica as a healthy replica of it.
func (s *Sentinel) waitReported(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, p := range s.sentinels {
		sc := sentinelClient(p)
		err := poll(ctx, func() error {
			addr, err := s.masterAddr(ctx, sc)
			if err != nil {
				return err
			}
			if addr != s.Master.Addr {
				return fmt.Errorf("reports master %s, want %s", addr, s.Master.Addr)
			}
			replicas, err := sc.Replicas(ctx, s.MasterName).Result()
			if err != nil {
				return err
			}
			healthy := false
			for _, r := range replicas {
				if net.JoinHostPort(r["ip"], r["port"]) == s.Replica.Addr && r["flags"] == "slave" && r["master-link-status"] == "ok" {
					healthy = true
				}
			}
			if !healthy {
				return fmt.Errorf("does not report replica %s as healthy: %v", s.Replica.Addr, replicas)
			}
			if len(s.sentinels) > 1 {
				others, err := sc.Sentinels(ctx, s.MasterName).Result()
				if err != nil {
					return err
				}
				if len(others) < len(s.sentinels)-1 {
					return fmt.Errorf("knows %d other sentinels, want %d", len(others), len(s.sentinels)-1)
				}
			}
			return nil
		})
		sc.Close()
		if err != nil {
			return fmt.Errorf("redistest: sentinel %s not ready within %v: %w", p.Addr, timeout, err)
		}
	}
	return nil
}

// waitReplica polls the replica until its link to the master is up.
func waitReplica(r *Server, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rc := nodeClient(r)
	defer rc.Close()
	err := poll(ctx, func() error {
		if st := infoField(ctx, rc, "master_link_status"); st != "up" {
			return fmt.Errorf("master_link_status %q", st)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redistest: replica %s not in sync within %v: %w", r.Addr, timeout, err)
	}
	return nil
}

// infoField returns one field of INFO replication, "" when unknown.
func infoField(ctx context.Context, c *redis.Client, name string) string {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return ""
	}
	return infoValue(info, name)
}

// poll calls check every 50ms until it returns nil or ctx ends; then it
// returns check's last error.
func poll(ctx context.Context, check func() error) error {
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// newSentinelProcess starts redis-server in sentinel mode monitoring
// 127.0.0.1:masterPort as name, with the given quorum. Sentinel rewrites its
// config file, so the file lives in the process's own directory.
func newSentinelProcess(name string, masterPort, quorum int) (*Server, error) {
	if _, err := exec.LookPath(Binary); err != nil {
		return nil, ErrNoRedis
	}
	dir, err := os.MkdirTemp("", "redistest-sentinel-")
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s %[5]d\n",
		name, masterPort, quorum, SentinelDownAfter.Milliseconds(), sentinelFailoverTimeout.Milliseconds())
	s := &Server{dir: dir}
	err = s.launch(func() ([]string, error) {
		// Written afresh each try: a failed start may have rewritten it.
		path, err := writeFile(dir, "sentinel.conf", conf)
		return []string{path, "--sentinel"}, err
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}
