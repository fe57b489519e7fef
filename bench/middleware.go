package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/lockgate/lockgate/core"
	fiberlock "github.com/lockgate/lockgate/middleware/fiber"
	httplock "github.com/lockgate/lockgate/middleware/nethttp"
)

// Frameworks and routes of the middleware benchmark. Every app serves
//
//	POST /plain/:id   the handler alone (it answers 200 "ok")
//	POST /locked/:id  the same handler behind lockgate's adapter, keyed
//	                  "bench:mw:{path.id}", with the adapter's defaults
//	                  (the Locker's 2s wait, then 429)
//
// on 127.0.0.1:0, each run with a new app and Locker. The load generator
// is httpClients goroutines in this process, each sending one request at a
// time for the run's duration (requests in flight at the end finish and
// count). Route "locked" sends a new id with every request (distinct keys);
// "locked-hot" sends the same id with every request (one hot key).
var (
	mwFrameworks = []string{"fiber", "nethttp"}
	mwRoutes     = []string{"plain", "locked", "locked-hot"}
)

// mwResult is one middleware run.
type mwResult struct {
	Requests int64
	Elapsed  time.Duration
	Rate     float64 // completed requests per second
	P50, P99 time.Duration
	Status   map[int]int64
	Errors   int64 // transport errors
	FirstErr string
}

// mwApp is a served app and how to stop it.
type mwApp struct {
	url  string
	stop func()
}

func startFiber(l *core.Locker) (*mwApp, error) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	ok := func(c *fiber.Ctx) error { return c.SendString("ok") }
	app.Post("/plain/:id", ok)
	app.Post("/locked/:id", fiberlock.New(fiberlock.Config{Locker: l, Key: "bench:mw:{path.id}"}), ok)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = app.Listener(ln)
	}()
	return &mwApp{url: "http://" + ln.Addr().String(), stop: func() {
		_ = app.ShutdownWithTimeout(5 * time.Second)
		<-done
	}}, nil
}

func startNetHTTP(l *core.Locker) (*mwApp, error) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	lock, err := httplock.New(l, "bench:mw:{path.id}")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /plain/{id}", ok)
	mux.Handle("POST /locked/{id}", lock(ok))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return &mwApp{url: "http://" + ln.Addr().String(), stop: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}}, nil
}

// runMiddleware runs one framework and route for d, after a warm-up of
// warm on the plain route (connections opened).
func runMiddleware(ctx context.Context, e *env, framework, route string, clients int, d, warm time.Duration, tag string) (mwResult, error) {
	c := newClient(e.addr(0), nil)
	defer c.Close()
	l, err := core.New(c, core.WithWait(waitBudget))
	if err != nil {
		return mwResult{}, err
	}
	defer l.Close()
	var app *mwApp
	switch framework {
	case "fiber":
		app, err = startFiber(l)
	case "nethttp":
		app, err = startNetHTTP(l)
	default:
		err = fmt.Errorf("unknown framework %q", framework)
	}
	if err != nil {
		return mwResult{}, err
	}
	defer app.stop()

	tr := &http.Transport{MaxIdleConns: clients, MaxIdleConnsPerHost: clients, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	path := "/" + route + "/"
	if route == "locked-hot" {
		path = "/locked/"
	}
	load(ctx, hc, app.url+"/plain/", func(g, i int) string { return "w" + strconv.Itoa(g) + "-" + strconv.Itoa(i) }, clients, warm)
	hot := "hot-" + tag
	id := func(g, i int) string {
		if route == "locked-hot" {
			return hot
		}
		return tag + "-" + strconv.Itoa(g) + "-" + strconv.Itoa(i)
	}
	r := load(ctx, hc, app.url+path, id, clients, d)
	return r, ctx.Err()
}

// load sends POST base+id(g, i) from clients goroutines (g) in a loop (i)
// until d has passed, and returns what came back.
func load(ctx context.Context, hc *http.Client, base string, id func(g, i int) string, clients int, d time.Duration) mwResult {
	type gstat struct {
		n, errs int64
		first   error
		status  map[int]int64
		lat     hist
	}
	gs := make([]gstat, clients)
	var stop atomic.Bool
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &gs[g]
			st.status = map[int]int64{}
			<-begin
			for i := 0; !stop.Load(); i++ {
				t0 := time.Now()
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+id(g, i), nil)
				if err != nil {
					st.errs++
					st.first = err
					return
				}
				resp, err := hc.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				st.lat.record(time.Since(t0))
				st.n++
				if err != nil {
					st.errs++
					if st.first == nil {
						st.first = err
					}
					if ctx.Err() != nil {
						return
					}
					continue
				}
				st.status[resp.StatusCode]++
			}
		}()
	}
	start := startFor(ctx, begin, d)
	stop.Store(true)
	wg.Wait()
	var r mwResult
	r.Elapsed = time.Since(start)
	r.Status = map[int]int64{}
	var all hist
	for g := range gs {
		st := &gs[g]
		r.Requests += st.n - st.errs
		r.Errors += st.errs
		if st.first != nil && r.FirstErr == "" && !errors.Is(st.first, context.Canceled) {
			r.FirstErr = st.first.Error()
		}
		for k, v := range st.status {
			r.Status[k] += v
		}
		all.merge(&st.lat)
	}
	r.Rate = float64(r.Requests) / r.Elapsed.Seconds()
	r.P50, r.P99 = all.quantile(0.50), all.quantile(0.99)
	return r
}
