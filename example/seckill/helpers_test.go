package seckill

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/redistest"
)

const testVoucher = 1

// openStore opens dsn (a fresh SQLite file in t.TempDir when empty) and
// closes it in t.Cleanup.
func openStore(t *testing.T, dsn string) *Store {
	t.Helper()
	if dsn == "" {
		dsn = filepath.Join(t.TempDir(), "seckill.db")
	}
	st, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

type nodeOpts struct {
	mode  LockMode
	http  string // one of Stacks; "" is fiber
	redis *redistest.Server
	wait  time.Duration
	// orderKey replaces OrderKeyTemplate (LockRedis on HTTP).
	orderKey string
	// readTimeout is the Redis clients' (default go-redis's).
	readTimeout time.Duration
	// unfenced sets Service.Unfenced: the check before the write
	// transaction, so that only the lock serialises a user's orders.
	unfenced bool
}

// startNodes starts n nodes in this process, each with its own Store
// connection pool to dsn and, in LockRedis, its own Redis client and
// Locker, as separate processes would have. It returns their base URLs.
func startNodes(t *testing.T, n int, dsn string, o nodeOpts) []string {
	t.Helper()
	var urls []string
	for range n {
		st := openStore(t, dsn)
		cfg := Config{Service: &Service{Store: st, Unfenced: o.unfenced}, Mode: o.mode, Wait: o.wait, orderKey: o.orderKey}
		if o.mode == LockRedis {
			client := redis.NewClient(&redis.Options{Addr: o.redis.Addr, ReadTimeout: o.readTimeout})
			locker := core.Must(core.New(client))
			t.Cleanup(func() { locker.Close(); client.Close() })
			cfg.Locker = locker
		}
		urls = append(urls, serveHTTP(t, cfg, o.http))
	}
	return urls
}

// serveHTTP serves cfg with the HTTP stack ("" is fiber) on a free
// loopback port until the test ends, as `seckill serve` does
// (NewStackServer).
func serveHTTP(t *testing.T, cfg Config, stack string) string {
	t.Helper()
	if stack == "" {
		stack = StackFiber
	}
	srv, err := NewStackServer(cfg, stack)
	if err != nil {
		t.Fatal(err)
	}
	return serveServer(t, srv)
}

// serveServer serves srv on a free loopback port until the test ends
// (then shuts it down; it must stop cleanly) and returns its base URL.
func serveServer(t *testing.T, srv StackServer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	})
	return "http://" + ln.Addr().String()
}

// seed resets testVoucher to stock.
func seed(t *testing.T, st *Store, stock int64) {
	t.Helper()
	if err := st.Seed(context.Background(), testVoucher, stock); err != nil {
		t.Fatal(err)
	}
}

func report(t *testing.T, st *Store) Report {
	t.Helper()
	r, err := st.Report(context.Background(), testVoucher)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func load(t *testing.T, targets []string, users, dup int) LoadResult {
	t.Helper()
	res, err := RunLoad(context.Background(), LoadConfig{Targets: targets, VoucherID: testVoucher, Users: users, Dup: dup, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("load: %v", res)
	return res
}
