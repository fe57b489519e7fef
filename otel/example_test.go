package otellock_test

import (
	"context"
	"fmt"

	"github.com/lockgate/lockgate/core"
	otellock "github.com/lockgate/lockgate/otel"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Lock metrics by pattern: here read back with a manual reader; in a
// service, the MeterProvider's reader is a Prometheus or OTLP exporter.
func Example() {
	srv, err := redistest.NewServer() // a throwaway redis-server; use your own address
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	obs, err := otellock.New(otellock.WithMeterProvider(mp)) // and WithTracerProvider for spans
	if err != nil {
		fmt.Println(err)
		return
	}
	locker, err := core.New(rdb, obs.Options()...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Shutdown(context.Background())

	ctx := context.Background()
	lease, err := locker.Lock(ctx, "order:42:7", core.WithPattern("order:{user}:{voucher}"))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.TryLock(ctx, "order:42:7", core.WithPattern("order:{user}:{voucher}"))
	fmt.Println("second owner:", err != nil)
	lease.Unlock(ctx)

	var rm metricdata.ResourceMetrics
	reader.Collect(ctx, &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "lockgate.lock.acquire.duration" {
			for _, outcome := range []string{"acquired", "busy"} {
				for _, p := range h.DataPoints {
					if v, _ := p.Attributes.Value("outcome"); v.AsString() == outcome {
						pat, _ := p.Attributes.Value("pattern")
						fmt.Printf("%s pattern=%s outcome=%s count=%d\n", m.Name, pat.AsString(), outcome, p.Count)
					}
				}
			}
		}
	}
	// Output:
	// second owner: true
	// lockgate.lock.acquire.duration pattern=order:{user}:{voucher} outcome=acquired count=1
	// lockgate.lock.acquire.duration pattern=order:{user}:{voucher} outcome=busy count=1
}
