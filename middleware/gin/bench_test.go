package ginlock_test

import (
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/middleware/gin"
	"github.com/lockgate/lockgate/redistest"
)

// benchApp serves /plain/:id bare and /locked/:id behind the middleware
// keyed by the id, on one Redis, on one engine with gin.Recovery.
func benchApp(b *testing.B) (*core.Locker, *server) {
	srv := redistest.Start(b)
	l := newLocker(b, srv)
	ok := func(c *gin.Context) { c.Status(http.StatusNoContent) }
	e := newEngine()
	e.POST("/plain/:id", ok)
	e.POST("/locked/:id", ginlock.Must(ginlock.New(l, "bench:{path.id}")), ok)
	return l, serve(b, e)
}

func post(b *testing.B, c *http.Client, url string) {
	resp, err := c.Post(url, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkRoute: the same route without and with the middleware, a
// distinct key per request, uncontended.
func BenchmarkRoute(b *testing.B) {
	_, s := benchApp(b)
	for _, route := range []string{"plain", "locked"} {
		b.Run(route, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				post(b, s.client, s.URL+"/"+route+"/"+strconv.Itoa(i))
			}
		})
	}
}

// BenchmarkCoreCycle: one core Lock+Unlock of a distinct key, the cost the
// middleware is measured against.
func BenchmarkCoreCycle(b *testing.B) {
	l, _ := benchApp(b)
	for i := 0; b.Loop(); i++ {
		locktest.Cycle(b, l, "core:"+strconv.Itoa(i))
	}
}

// BenchmarkOverhead interleaves a plain request, a locked request and a
// core cycle in every iteration (so machine noise hits all three alike) and
// reports added/cycle: (locked − plain) ÷ core cycle. The target is ≤ 1.2
// (a benchmark figure, not an assertion).
func BenchmarkOverhead(b *testing.B) {
	l, s := benchApp(b)
	var plain, locked, core time.Duration
	for i := 0; b.Loop(); i++ {
		id := strconv.Itoa(i)
		t0 := time.Now()
		post(b, s.client, s.URL+"/plain/"+id)
		t1 := time.Now()
		post(b, s.client, s.URL+"/locked/"+id)
		t2 := time.Now()
		locktest.Cycle(b, l, "core:"+id)
		t3 := time.Now()
		plain, locked, core = plain+t1.Sub(t0), locked+t2.Sub(t1), core+t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(plain.Nanoseconds())/n, "plain-ns/req")
	b.ReportMetric(float64(locked.Nanoseconds())/n, "locked-ns/req")
	b.ReportMetric(float64(core.Nanoseconds())/n, "core-ns/cycle")
	b.ReportMetric(float64(locked-plain)/float64(core), "added/cycle")
}
