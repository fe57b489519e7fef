package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/lockgate/lockgate/example/seckill"
)

// The Prometheus names of the write-limit metrics of `seckill serve`, as
// the OpenTelemetry Prometheus exporter writes them (a counter gets
// _total; the units "{order}" and "{write}" are annotations).
const (
	metricPermitWaits = "seckill_order_write_permit_waits_total" // counter
	metricWritesPeak  = "seckill_order_writes_peak"              // gauge
)

// writesKey is the Redis counter of the order writes of voucher in
// progress across every node, kept by `seckill serve -count-writes`.
func writesKey(voucherID int64) string {
	return fmt.Sprintf("seckill:writes-in-progress:%d", voucherID)
}

// writeCounter is the WriteProbe of `seckill serve -count-writes`: it
// raises a counter in Redis (writesKey) before each order write and
// lowers it once the write returned, and keeps the highest value its own
// raises returned. Redis applying the raises and lowers one at a time,
// the highest value any node's raise returned is the peak of the counter,
// exactly; and as each write lies between its raise and its lower, that
// peak is at least the number of writes that were in progress at once
// across the nodes (an upper bound: it also counts the round trips
// around the writes). It costs two round trips per order.
type writeCounter struct {
	client *redis.Client
	peak   atomic.Int64
}

func (c *writeCounter) probe(ctx context.Context, _, voucherID int64) func() {
	key := writesKey(voucherID)
	ctx = context.WithoutCancel(ctx) // the lower must follow the raise
	n, err := c.client.Incr(ctx, key).Result()
	if err != nil {
		return func() {}
	}
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	return func() { c.client.Decr(ctx, key) }
}

// serviceMetrics exports the write-limit figures of svc on /metrics:
// metricPermitWaits (svc.PermitWaits: orders that found every write permit
// of their voucher held and waited), and, with a writeCounter,
// metricWritesPeak (its peak).
func (t *telemetry) serviceMetrics(svc *seckill.Service, wc *writeCounter) error {
	m := t.mp.Meter("github.com/lockgate/lockgate/example/cmd/seckill")
	_, err := m.Int64ObservableCounter("seckill.order.write_permit_waits", metric.WithUnit("{order}"),
		metric.WithDescription("Orders that found every write permit of their voucher held and waited for one."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(svc.PermitWaits())
			return nil
		}))
	if err != nil || wc == nil {
		return err
	}
	_, err = m.Int64ObservableGauge("seckill.order.writes_peak", metric.WithUnit("{write}"),
		metric.WithDescription("The highest count of order writes in progress across the nodes that this node's writes saw (serve -count-writes)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(wc.peak.Load())
			return nil
		}))
	return err
}
