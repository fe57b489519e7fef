package seckill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Defaults of LoadConfig.
const (
	DefaultLoadConcurrency    = 32
	DefaultLoadTimeout        = 2 * time.Minute
	DefaultLoadRequestTimeout = 15 * time.Second
)

// LoadConfig describes a load run: Users users, each sending Dup
// concurrent duplicate orders of one voucher, spread round-robin over
// Targets.
type LoadConfig struct {
	// Targets are base URLs of the nodes, e.g. "http://127.0.0.1:8081".
	// Required; only loopback hosts are accepted.
	Targets []string
	// VoucherID is the voucher ordered. Required.
	VoucherID int64
	// Users is the number of users (ids FirstUser..FirstUser+Users-1). Required.
	Users int
	// Dup is the number of concurrent duplicate requests of each user.
	// Required.
	Dup int
	// FirstUser is the first user id. Default 1.
	FirstUser int64
	// Concurrency is how many users send at once. Default 32.
	Concurrency int
	// Timeout bounds the whole run; requests not sent by then count as
	// Failed. Default 2m.
	Timeout time.Duration
	// RequestTimeout bounds one request. Default 15s.
	RequestTimeout time.Duration
	// Progress receives a progress bar; nil for none.
	Progress io.Writer
	// Client sends the requests. Default a client with keep-alive
	// connections sized for Concurrency×Dup.
	Client *http.Client
}

// LoadResult counts the outcomes of a load run.
type LoadResult struct {
	Requests     int // requests planned (Users × Dup)
	OK           int // 200
	Already      int // 400 User has already purchased
	OutOfStock   int // 400 Out of stock
	Busy         int // 429
	ServerErrors int // 5xx
	Other        int // any other status
	Failed       int // transport errors and requests not sent in time
	P50, P99     time.Duration
	Elapsed      time.Duration
}

// String prints the counts on one line.
func (r LoadResult) String() string {
	return fmt.Sprintf("requests=%d ok=%d already_purchased=%d out_of_stock=%d busy_429=%d server_5xx=%d other=%d failed=%d p50=%s p99=%s elapsed=%s",
		r.Requests, r.OK, r.Already, r.OutOfStock, r.Busy, r.ServerErrors, r.Other, r.Failed,
		r.P50.Round(time.Microsecond*100), r.P99.Round(time.Microsecond*100), r.Elapsed.Round(time.Millisecond))
}

// ParseTargets splits a comma-separated list of base URLs and checks that
// each is an http URL on a loopback host.
func ParseTargets(s string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimRight(strings.TrimSpace(t), "/")
		if t == "" {
			continue
		}
		u, err := url.Parse(t)
		if err != nil || u.Scheme != "http" || u.Host == "" {
			return nil, fmt.Errorf("-targets: %q is not an http://host:port URL", t)
		}
		if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
			return nil, fmt.Errorf("-targets: %q is not a loopback address", t)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, errors.New("-targets is empty")
	}
	return out, nil
}

func (c LoadConfig) withDefaults() (LoadConfig, error) {
	if len(c.Targets) == 0 {
		return c, errors.New("loadgen: no targets")
	}
	if _, err := ParseTargets(strings.Join(c.Targets, ",")); err != nil {
		return c, err
	}
	if c.VoucherID <= 0 || c.Users <= 0 || c.Dup <= 0 {
		return c, errors.New("loadgen: -voucher, -users and -dup must be positive")
	}
	if c.FirstUser <= 0 {
		c.FirstUser = 1
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultLoadConcurrency
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultLoadTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultLoadRequestTimeout
	}
	return c, nil
}

// RunLoad runs the load described by cfg and counts the outcomes. It stops
// after cfg.Timeout or when ctx ends, whichever is first (the result then
// counts the unsent requests as Failed and err is the context's error).
func RunLoad(ctx context.Context, cfg LoadConfig) (LoadResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return LoadResult{}, err
	}
	client := cfg.Client
	if client == nil {
		tr := &http.Transport{
			MaxIdleConns:        cfg.Concurrency * cfg.Dup,
			MaxIdleConnsPerHost: cfg.Concurrency * cfg.Dup,
			IdleConnTimeout:     5 * time.Second,
		}
		defer tr.CloseIdleConnections()
		client = &http.Client{Transport: tr}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	total := cfg.Users * cfg.Dup
	var bar *progressbar.ProgressBar
	if cfg.Progress != nil {
		bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(cfg.Progress),
			progressbar.OptionSetDescription("orders"),
			progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}

	var (
		mu        sync.Mutex
		res       = LoadResult{Requests: total}
		latencies = make([]time.Duration, 0, total)
		done      int
	)
	record := func(status int, body []byte, lat time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		done++
		if bar != nil {
			bar.Add(1)
		}
		if err != nil {
			res.Failed++
			return
		}
		latencies = append(latencies, lat)
		switch {
		case status == http.StatusOK:
			res.OK++
		case status == http.StatusBadRequest:
			var e errorReply
			json.Unmarshal(body, &e)
			switch e.Error {
			case MsgAlreadyPurchased:
				res.Already++
			case MsgOutOfStock:
				res.OutOfStock++
			default:
				res.Other++
			}
		case status == http.StatusTooManyRequests:
			res.Busy++
		case status >= 500:
			res.ServerErrors++
		default:
			res.Other++
		}
	}

	start := time.Now()
	users := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < cfg.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range users {
				var uw sync.WaitGroup
				for d := 0; d < cfg.Dup; d++ {
					target := cfg.Targets[(u*cfg.Dup+d)%len(cfg.Targets)]
					uw.Add(1)
					go func() {
						defer uw.Done()
						status, body, lat, err := order(ctx, client, cfg.RequestTimeout, target, cfg.VoucherID, cfg.FirstUser+int64(u))
						record(status, body, lat, err)
					}()
				}
				uw.Wait()
			}
		}()
	}
feed:
	for u := 0; u < cfg.Users; u++ {
		select {
		case users <- u:
		case <-ctx.Done():
			break feed
		}
	}
	close(users)
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.Failed += total - done
	if bar != nil {
		bar.Finish()
	}
	slices.Sort(latencies)
	res.P50, res.P99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
	return res, context.Cause(ctx)
}

// order sends one order request and returns its status, body and latency.
func order(ctx context.Context, client *http.Client, timeout time.Duration, target string, voucherID, userID int64) (int, []byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := target + "/voucher-order/seckill/" + strconv.FormatInt(voucherID, 10) + "?user_id=" + strconv.FormatInt(userID, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return 0, nil, 0, err
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	lat := time.Since(start)
	if err != nil {
		return 0, nil, 0, err
	}
	return resp.StatusCode, body, lat, nil
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}
