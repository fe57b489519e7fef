package core_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// Ping reaches every node the Locker uses and names each one that does not
// answer with its cause: one server, a 3-master Cluster, a Redlock of three
// with one node down; each healthy deployment answers nil (the control).
func TestPing(t *testing.T) {
	t.Parallel()
	ctx := locktest.Context(t)

	t.Run("single", func(t *testing.T) {
		srv := redistest.Start(t)
		l := locktest.Locker(t, srv.Client(t))
		if err := l.Ping(ctx); err != nil {
			t.Fatalf("Ping of a healthy server = %v", err)
		}
		srv.Stop()
		start := time.Now()
		err := l.Ping(ctx)
		var ne *core.NodeError
		if !errors.Is(err, core.ErrUnavailable) || !errors.As(err, &ne) || ne.Node != srv.Addr || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("Ping of a stopped server = %v, want ErrUnavailable naming %s and the refusal", err, srv.Addr)
		}
		// Not retried with backoff (2s and more before): 1.5s leaves room for
		// a loaded machine (700ms was outlasted once in a full run).
		if took := time.Since(start); took > 1500*time.Millisecond {
			t.Errorf("Ping of a stopped server took %v", took)
		}
	})

	// A server that refuses the client's AUTH is unavailable with
	// WRONGPASS, not a server too old (go-redis leaves the pipelined INFO
	// of a connection it could not set up without reply or error).
	t.Run("wrong password", func(t *testing.T) {
		srv := redistest.Start(t)
		if err := srv.Client(t).Do(ctx, "ACL", "SETUSER", "alice", "on", ">right-pw", "~*", "&*", "+@all").Err(); err != nil {
			t.Fatal(err)
		}
		opts := srv.Options()
		opts.Username, opts.Password = "alice", "wrong-pw"
		c := redis.NewClient(opts)
		t.Cleanup(func() { c.Close() })
		err := locktest.Locker(t, c).Ping(ctx)
		if !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrUnsupported) || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Fatalf("Ping with a wrong password = %v, want ErrUnavailable saying WRONGPASS", err)
		}
	})

	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t, 3)
		l := locktest.Locker(t, cl.Client(t))
		if err := l.Ping(ctx); err != nil {
			t.Fatalf("Ping of a healthy Cluster = %v", err)
		}
		if err := cl.Servers[1].Pause(); err != nil {
			t.Fatal(err)
		}
		defer cl.Servers[1].Resume()
		err := l.Ping(ctx)
		if !errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), cl.Servers[1].Addr) {
			t.Fatalf("Ping of a Cluster with a hung master = %v, want ErrUnavailable naming %s", err, cl.Servers[1].Addr)
		}
	})

	t.Run("redlock", func(t *testing.T) {
		srvs := redistest.StartN(t, 3)
		var cs []redis.UniversalClient
		for _, s := range srvs {
			cs = append(cs, s.Client(t))
		}
		l, err := core.NewRedlock(cs)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		if err := l.Ping(ctx); err != nil {
			t.Fatalf("Ping of a healthy Redlock = %v", err)
		}
		srvs[2].Stop()
		err = l.Ping(ctx)
		var ne *core.NodeError
		if !errors.Is(err, core.ErrUnavailable) || !errors.As(err, &ne) || ne.Node != srvs[2].Addr {
			t.Fatalf("Ping of a Redlock with a node down = %v, want ErrUnavailable naming %s", err, srvs[2].Addr)
		}
	})
}
