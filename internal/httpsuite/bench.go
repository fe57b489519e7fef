package httpsuite

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// The benchmarks every HTTP adapter runs over its Stack, on one real
// redis-server: the same route bare (/plain/{id}) and behind the adapter
// (/locked/{id}, keyed by the id), a distinct key per request,
// uncontended, measured against core's own Lock+Unlock.

// benchApp is a served pair of routes and a client for them.
type benchApp struct {
	b      *testing.B
	locker *core.Locker
	base   string
	client *http.Client
}

func newBenchApp(b *testing.B, s Stack) *benchApp {
	srv := redistest.Start(b)
	l, _ := locktest.NewLocker(b, srv)
	ok := func(context.Context, *core.Lease, Request) (int, string) { return http.StatusNoContent, "" }
	base := s.Serve(b, []Route{
		{Method: "POST", Path: "/plain/{id}", Handler: ok, Bare: true},
		{Method: "POST", Path: "/locked/{id}", Locker: l, Key: "bench:{path.id}", Handler: ok},
	})
	tr := &http.Transport{}
	b.Cleanup(tr.CloseIdleConnections)
	return &benchApp{b: b, locker: l, base: base, client: &http.Client{Transport: tr}}
}

// post sends one request to route with id and fails b unless it is 204.
func (a *benchApp) post(route, id string) {
	resp, err := a.client.Post(a.base+"/"+route+"/"+id, "", nil)
	if err != nil {
		a.b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		a.b.Fatalf("%s: status %d", route, resp.StatusCode)
	}
}

// BenchRoute times the route without ("plain") and with ("locked") the
// middleware.
func BenchRoute(b *testing.B, s Stack) {
	a := newBenchApp(b, s)
	for _, route := range []string{"plain", "locked"} {
		b.Run(route, func(b *testing.B) {
			a.b = b
			for i := 0; b.Loop(); i++ {
				a.post(route, strconv.Itoa(i))
			}
		})
	}
}

// BenchCoreCycle times one core Lock+Unlock of a distinct key, the cost the
// middleware is measured against.
func BenchCoreCycle(b *testing.B, s Stack) {
	a := newBenchApp(b, s)
	for i := 0; b.Loop(); i++ {
		locktest.Cycle(b, a.locker, "core:"+strconv.Itoa(i))
	}
}

// BenchOverhead interleaves a plain request, a locked request and a core
// cycle in every iteration (so machine noise hits all three alike) and
// reports added/cycle: (locked − plain) ÷ core cycle. The target is ≤ 1.2.
func BenchOverhead(b *testing.B, s Stack) {
	a := newBenchApp(b, s)
	var plain, locked, cycle time.Duration
	for i := 0; b.Loop(); i++ {
		id := strconv.Itoa(i)
		t0 := time.Now()
		a.post("plain", id)
		t1 := time.Now()
		a.post("locked", id)
		t2 := time.Now()
		locktest.Cycle(b, a.locker, "core:"+id)
		t3 := time.Now()
		plain, locked, cycle = plain+t1.Sub(t0), locked+t2.Sub(t1), cycle+t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(plain.Nanoseconds())/n, "plain-ns/req")
	b.ReportMetric(float64(locked.Nanoseconds())/n, "locked-ns/req")
	b.ReportMetric(float64(cycle.Nanoseconds())/n, "core-ns/cycle")
	b.ReportMetric(float64(locked-plain)/float64(cycle), "added/cycle")
}
