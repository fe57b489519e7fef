package seckill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lockgate/lockgate/core"
	seckillv1 "github.com/lockgate/lockgate/example/proto/seckill/v1"
	"github.com/lockgate/lockgate/redistest"
)

// writeGate holds every order write of the services it is hooked into
// (Service.WriteProbe) until the test releases it, and counts the writes in
// progress across them: entered receives the user of each write that
// began, release[user] lets it go on.
type writeGate struct {
	entered chan int64
	mu      sync.Mutex
	release map[int64]chan struct{}
	now     atomic.Int32
	peak    atomic.Int32
}

func newWriteGate() *writeGate {
	return &writeGate{entered: make(chan int64, 16), release: map[int64]chan struct{}{}}
}

// ch is user's release channel.
func (g *writeGate) ch(user int64) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.release[user]
	if !ok {
		c = make(chan struct{})
		g.release[user] = c
	}
	return c
}

func (g *writeGate) writing(_ context.Context, user, _ int64) func() {
	n := g.now.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	g.entered <- user
	<-g.ch(user)
	return func() { g.now.Add(-1) }
}

// writeLimitNode is one node's Service (its own store pool, Redis client
// and Locker) whose Locker signals waitingPermit when a write permit is
// waited for.
func writeLimitNode(t *testing.T, srv *redistest.Server, dsn string, limit int, wait time.Duration, g *writeGate, waitingPermit chan<- int64) (*Service, *core.Locker) {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	obs := core.ObserverFunc(func(_ context.Context, e core.Event) {
		if e.Kind == core.EventWaiting && e.Permits > 0 {
			waitingPermit <- int64(e.Permits)
		}
	})
	locker := core.Must(core.New(client, core.WithObserver(obs)))
	t.Cleanup(func() { locker.Close(); client.Close() })
	svc := &Service{Store: openStore(t, dsn), Locker: locker, WriteLimit: limit, WriteWait: wait, WriteProbe: g.writing}
	return svc, locker
}

// orderUnderLock places user's order on svc as the adapters do: holding
// the user's order lock, with its lease's context.
func orderUnderLock(ctx context.Context, svc *Service, locker *core.Locker, user int64) (int64, error) {
	lease, err := locker.Lock(ctx, OrderKey(user, testVoucher))
	if err != nil {
		return 0, err
	}
	defer lease.Unlock(context.Background())
	return svc.Order(lease.Context(), user, testVoucher)
}

type orderResult struct {
	user, id int64
	err      error
}

// TestWriteLimit: with a WriteLimit of 2, two nodes' order writes of one
// voucher are at most 2 in progress at once; a third order waits for a
// permit (an EventWaiting of the semaphore, not a sleep) and writes when
// one of the first two finishes. The control, without a limit, has all
// three writes in progress at once. SQLite and PostgreSQL (skipped
// without a server).
func TestWriteLimit(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			for _, limit := range []int{2, 0} {
				name := "limit=2"
				if limit == 0 {
					name = "control-no-limit"
				}
				t.Run(name, func(t *testing.T) {
					dsn := ""
					if db == "postgres" {
						dsn = freshPostgres(t)
					} else {
						dsn = t.TempDir() + "/seckill.db"
					}
					testWriteLimit(t, dsn, limit)
				})
			}
		})
	}
}

func testWriteLimit(t *testing.T, dsn string, limit int) {
	srv := redistest.Start(t)
	seed(t, openStore(t, dsn), 10)
	g := newWriteGate()
	waiting := make(chan int64, 16)
	a, la := writeLimitNode(t, srv, dsn, limit, 20*time.Second, g, waiting)
	b, lb := writeLimitNode(t, srv, dsn, limit, 20*time.Second, g, waiting)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	results := make(chan orderResult, 3)
	order := func(svc *Service, l *core.Locker, user int64) {
		go func() {
			id, err := orderUnderLock(ctx, svc, l, user)
			results <- orderResult{user, id, err}
		}()
	}
	next := func(what string) int64 {
		t.Helper()
		select {
		case u := <-g.entered:
			return u
		case <-ctx.Done():
			t.Fatalf("%s: no write began", what)
		}
		return 0
	}
	// Users 1 (node a) and 2 (node b) write and are held there.
	order(a, la, 1)
	order(b, lb, 2)
	first := map[int64]bool{next("first write"): true, next("second write"): true}
	if !first[1] || !first[2] {
		t.Fatalf("writes began: %v, want users 1 and 2", first)
	}
	order(a, la, 3)
	if limit == 0 {
		// The control: the third write begins while the first two
		// are held.
		if u := next("third write (no limit)"); u != 3 {
			t.Fatalf("third write of user %d, want 3", u)
		}
		if p := g.peak.Load(); p != 3 {
			t.Fatalf("control: %d writes in progress at once, want 3 (no limit)", p)
		}
		for u := int64(1); u <= 3; u++ {
			close(g.ch(u))
		}
	} else {
		// User 3 waits in the semaphore's queue: every permit is held.
		select {
		case p := <-waiting:
			if p != int64(limit) {
				t.Fatalf("waiting for a permit of a semaphore of %d, want %d", p, limit)
			}
		case u := <-g.entered:
			t.Fatalf("user %d's write began with 2 writes in progress and a limit of 2", u)
		case <-ctx.Done():
			t.Fatal("the third order neither waited for a permit nor wrote")
		}
		select {
		case u := <-g.entered:
			t.Fatalf("user %d's write began with 2 writes in progress and a limit of 2", u)
		default:
		}
		// User 1's write ends: its permit goes to user 3.
		close(g.ch(1))
		if u := next("third write after a release"); u != 3 {
			t.Fatalf("write of user %d, want 3", u)
		}
		close(g.ch(2))
		close(g.ch(3))
		if p := g.peak.Load(); p != 2 {
			t.Fatalf("%d writes in progress at once, want 2 (the limit)", p)
		}
		if w := a.PermitWaits() + b.PermitWaits(); w != 1 {
			t.Fatalf("PermitWaits %d, want 1 (user 3)", w)
		}
	}
	for range 3 {
		r := <-results
		if r.err != nil || r.id <= 0 {
			t.Fatalf("user %d: order %d, %v", r.user, r.id, r.err)
		}
	}
	if rep := report(t, openStore(t, dsn)); rep.Orders != 3 || rep.Duplicates != 0 || rep.Oversold != 0 {
		t.Fatalf("report %+v, want 3 orders, no duplicate, no oversell", rep)
	}
}

// TestWriteLimitBusy: an order that finds no write permit within
// WriteWait fails with core's busy error, answered as the busy outcome
// (HTTP 429 with Retry-After, gRPC ResourceExhausted), never as a server
// error; nothing is written for it.
func TestWriteLimitBusy(t *testing.T) {
	srv := redistest.Start(t)
	dsn := t.TempDir() + "/seckill.db"
	seed(t, openStore(t, dsn), 10)
	g := newWriteGate()
	waiting := make(chan int64, 16)
	svc, l := writeLimitNode(t, srv, dsn, 1, 100*time.Millisecond, g, waiting)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held := make(chan orderResult, 1)
	go func() {
		id, err := orderUnderLock(ctx, svc, l, 1)
		held <- orderResult{1, id, err}
	}()
	if u := <-g.entered; u != 1 {
		t.Fatalf("write of user %d, want 1", u)
	}
	_, err := orderUnderLock(ctx, svc, l, 2)
	var busy *core.BusyError
	if !errors.As(err, &busy) || !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("second order: %v, want a *core.BusyError", err)
	}
	cfg, err2 := Config{Service: svc, Locker: l}.withDefaults()
	if err2 != nil {
		t.Fatal(err2)
	}
	if code, msg := cfg.outcome(ctx, err); code != http.StatusTooManyRequests || msg != MsgBusy {
		t.Fatalf("HTTP outcome %d %q, want 429 %q", code, msg, MsgBusy)
	}
	if ra := orderRetryAfter(err); ra == "" {
		t.Fatal("no Retry-After for a busy write permit")
	}
	if code, _ := cfg.rpcOutcome(ctx, err); code != codes.ResourceExhausted {
		t.Fatalf("RPC outcome %v, want ResourceExhausted", code)
	}
	close(g.ch(1))
	if r := <-held; r.err != nil {
		t.Fatalf("held order: %v", r.err)
	}
	if rep := report(t, openStore(t, dsn)); rep.Orders != 1 {
		t.Fatalf("report %+v, want the held order only", rep)
	}
}

// TestWriteLimitBusyAnswers: with every write permit of the voucher held
// (the test holds the only one), an order through each HTTP stack is
// answered 429 with Retry-After and the busy message, through gRPC and
// Connect ResourceExhausted with a RetryInfo; the control, once the permit
// is given back, is the same order placed (200 / OK), so the busy answer
// was the permit's.
func TestWriteLimitBusyAnswers(t *testing.T) {
	srv := redistest.Start(t)
	dsn := t.TempDir() + "/seckill.db"
	seed(t, openStore(t, dsn), 100)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	l := core.Must(core.New(client))
	t.Cleanup(func() { l.Close(); client.Close() })
	svc := &Service{Store: openStore(t, dsn), Locker: l, WriteLimit: 1, WriteWait: 100 * time.Millisecond}
	cfg := Config{Service: svc, Mode: LockRedis, Locker: l, Wait: 5 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	type answer struct {
		ok, busy bool
		detail   string
	}
	orders := map[string]func(user int64) answer{}
	hc := &http.Client{Timeout: 10 * time.Second}
	for _, stack := range Stacks {
		base := serveHTTP(t, cfg, stack)
		orders[stack] = func(user int64) answer {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/voucher-order/seckill/1?user_id="+strconv.FormatInt(user, 10), nil)
			resp, err := hc.Do(req)
			if err != nil {
				return answer{detail: err.Error()}
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ra := resp.Header.Get("Retry-After")
			return answer{ok: resp.StatusCode == http.StatusOK,
				busy:   resp.StatusCode == http.StatusTooManyRequests && ra != "" && strings.Contains(string(body), MsgBusy),
				detail: fmt.Sprintf("%d Retry-After %q %s", resp.StatusCode, ra, body)}
		}
	}
	gc := seckillv1.NewSeckillClient(serveGRPCTest(t, cfg))
	orders["grpc"] = func(user int64) answer {
		_, err := gc.Order(ctx, &seckillv1.OrderRequest{UserId: user, VoucherId: testVoucher})
		st := status.Convert(err)
		retry := false
		for _, d := range st.Details() {
			if _, ok := d.(*errdetails.RetryInfo); ok {
				retry = true
			}
		}
		return answer{ok: err == nil, busy: st.Code() == codes.ResourceExhausted && retry, detail: fmt.Sprintf("%v RetryInfo %v", st, retry)}
	}
	cc := connectClients(t, serveConnectTest(t, cfg))["connect"]
	orders["connect"] = func(user int64) answer {
		_, err := cc.Order(ctx, connect.NewRequest(&seckillv1.OrderRequest{UserId: user, VoucherId: testVoucher}))
		code, msg, retry := rpcCode(err)
		return answer{ok: err == nil, busy: code == codes.ResourceExhausted && retry, detail: fmt.Sprintf("%v %q RetryInfo %v", code, msg, retry)}
	}

	held, err := l.Semaphore(ctx, WriteKey(testVoucher), 1)
	if err != nil {
		t.Fatal(err)
	}
	user := int64(0)
	users := map[string]int64{}
	for name, order := range orders {
		user++
		users[name] = user
		if a := order(user); !a.busy {
			t.Errorf("%s, the write permit held: %s, want the busy answer", name, a.detail)
		}
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for name, order := range orders {
		if a := order(users[name]); !a.ok {
			t.Errorf("control: %s, the permit free: %s, want the order placed", name, a.detail)
		}
	}
	if w := svc.PermitWaits(); w != int64(len(orders)) {
		t.Errorf("PermitWaits %d, want %d (each busy order waited)", w, len(orders))
	}
}
