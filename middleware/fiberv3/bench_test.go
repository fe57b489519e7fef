package fiberlock_test

import (
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	fiberlock "github.com/lockgate/lockgate/middleware/fiberv3"
	"github.com/lockgate/lockgate/redistest"
)

// benchApp serves /plain/:id bare and /locked/:id behind the middleware
// keyed by the id, over a real listener, on one Redis.
func benchApp(b *testing.B) (*core.Locker, *app) {
	srv := redistest.Start(b)
	l := newLocker(b, srv)
	ok := func(c fiber.Ctx) error { return c.SendStatus(fiber.StatusNoContent) }
	f := newApp()
	f.Post("/plain/:id", ok)
	f.Post("/locked/:id", fiberlock.New(fiberlock.Config{Locker: l, Key: "bench:{path.id}"}), ok)
	return l, start(b, f)
}

func post(b *testing.B, a *app, path string) {
	resp, err := a.client.Post(a.URL+path, "", nil)
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
	_, a := benchApp(b)
	for _, route := range []string{"plain", "locked"} {
		b.Run(route, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				post(b, a, "/"+route+"/"+strconv.Itoa(i))
			}
		})
	}
}

// BenchmarkCoreCycle: one core Lock+Unlock of a distinct key.
func BenchmarkCoreCycle(b *testing.B) {
	l, _ := benchApp(b)
	for i := 0; b.Loop(); i++ {
		locktest.Cycle(b, l, "core:"+strconv.Itoa(i))
	}
}

// BenchmarkOverhead interleaves a plain request, a locked request and a
// core cycle in every iteration and reports added/cycle:
// (locked − plain) ÷ core cycle. The target is ≤ 1.2.
func BenchmarkOverhead(b *testing.B) {
	l, a := benchApp(b)
	var plain, locked, cyc time.Duration
	for i := 0; b.Loop(); i++ {
		id := strconv.Itoa(i)
		t0 := time.Now()
		post(b, a, "/plain/"+id)
		t1 := time.Now()
		post(b, a, "/locked/"+id)
		t2 := time.Now()
		locktest.Cycle(b, l, "core:"+id)
		t3 := time.Now()
		plain, locked, cyc = plain+t1.Sub(t0), locked+t2.Sub(t1), cyc+t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(plain.Nanoseconds())/n, "plain-ns/req")
	b.ReportMetric(float64(locked.Nanoseconds())/n, "locked-ns/req")
	b.ReportMetric(float64(cyc.Nanoseconds())/n, "core-ns/cycle")
	b.ReportMetric(float64(locked-plain)/float64(cyc), "added/cycle")
}
