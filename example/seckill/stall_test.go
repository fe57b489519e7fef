package seckill

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/redistest"
)

// A Redis stall longer than the clients' read timeout, with requests in
// flight: go-redis re-sends the late scripts or gives up, and Redis runs
// what reached it when it resumes — for callers that may have been
// answered already. Every request gets one answer, and afterwards no lock
// is left held by nobody (before: all answered 200 and left their lock
// hashes held for the TTL, the acquire having run twice). The probe:
// scripts ran in Redis after the stall.
func TestStallLeavesNoLocks(t *testing.T) {
	srv := redistest.Start(t)
	direct := srv.Client(t)
	dsn := filepath.Join(t.TempDir(), "seckill.db")
	st := openStore(t, dsn)
	seed(t, st, 100)
	targets := startNodes(t, 3, dsn, nodeOpts{mode: LockRedis, redis: srv, readTimeout: 300 * time.Millisecond, wait: 5 * time.Second})
	client := &http.Client{Timeout: 30 * time.Second}
	// Warm each node (server check, script cache).
	for i, target := range targets {
		resp, err := client.Post(fmt.Sprintf("%s/voucher-order/seckill/1?user_id=%d", target, 1000+i), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	before := evalshaCalls(t, direct)

	const requests = 12
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			srv.Resume()
		}
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for u := 1; u <= requests; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Post(fmt.Sprintf("%s/voucher-order/seckill/1?user_id=%d", targets[u%len(targets)], u), "", nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			statuses[resp.StatusCode]++
			mu.Unlock()
		}()
	}
	time.Sleep(time.Second) // the fault: the stall, past the clients' 300ms read timeout
	srv.Resume()
	resumed = true
	wg.Wait()
	t.Logf("statuses after a 1s stall: %v", statuses)
	if n := statuses[http.StatusOK] + statuses[http.StatusServiceUnavailable]; n != requests {
		t.Fatalf("statuses %v: want each request answered 200 or 503", statuses)
	}
	// Requests whose lock call was abandoned are undone in the background
	// (retried until Redis answers): bounded wait until no order lock is
	// left.
	var left []string
	for i := 0; i < 100; i++ {
		left = left[:0]
		iter := direct.Scan(context.Background(), 0, "lockgate:{order:*}", 100).Iterator()
		for iter.Next(context.Background()) {
			if k := iter.Val(); strings.HasSuffix(k, "}") {
				left = append(left, k)
			}
		}
		if len(left) == 0 {
			if n := evalshaCalls(t, direct) - before; n < 2 {
				t.Fatalf("probe: %d scripts ran after the stall, want an abandoned acquire and its undo", n)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("locks left held after the stall: %v", left)
}

// evalshaCalls is the number of EVALSHA and EVAL commands the server ran.
func evalshaCalls(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\r\n") {
		for _, name := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if rest, ok := strings.CutPrefix(line, name); ok {
				calls, _, _ := strings.Cut(rest, ",")
				v, _ := strconv.ParseInt(calls, 10, 64)
				n += v
			}
		}
	}
	return n
}
