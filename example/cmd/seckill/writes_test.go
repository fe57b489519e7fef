package main

import (
	"fmt"
	"strings"
	"testing"
)

// writeLimitMetrics is one node's /metrics with only write permits (the
// pattern of seckill.WritePattern) and the write-limit figures.
func writeLimitMetrics(waits, peak, permits int) string {
	return fmt.Sprintf(`# TYPE seckill_order_write_permit_waits_total counter
seckill_order_write_permit_waits_total{otel_scope_name="x"} %d
# TYPE seckill_order_writes_peak gauge
seckill_order_writes_peak{otel_scope_name="x"} %d
# TYPE lockgate_lock_acquire_duration_seconds histogram
lockgate_lock_acquire_duration_seconds_bucket{outcome="acquired",pattern="order-writes:{voucher}",le="0.1"} %d
lockgate_lock_acquire_duration_seconds_bucket{outcome="acquired",pattern="order-writes:{voucher}",le="+Inf"} %d
lockgate_lock_acquire_duration_seconds_sum{outcome="acquired",pattern="order-writes:{voucher}"} 0.1
lockgate_lock_acquire_duration_seconds_count{outcome="acquired",pattern="order-writes:{voucher}"} %d
# TYPE lockgate_lock_renewals_total counter
lockgate_lock_renewals_total{outcome="ok",pattern="order-writes:{voucher}"} 2
`, waits, peak, permits, permits, permits)
}

// TestLockStatsWriteLimit: the write permits' acquires and renewals stay
// out of the lock figures (the order locks'), the permits taken and the
// waits are summed over the nodes, and the peak is the highest node's.
func TestLockStatsWriteLimit(t *testing.T) {
	var s lockStats
	for _, text := range []string{writeLimitMetrics(3, 2, 5), writeLimitMetrics(4, 3, 6), metricsNodeA} {
		if err := s.add(strings.NewReader(text)); err != nil {
			t.Fatal(err)
		}
	}
	var a lockStats // node A alone: the order locks' figures
	if err := a.add(strings.NewReader(metricsNodeA)); err != nil {
		t.Fatal(err)
	}
	if s.acquires != a.acquires || s.hits != a.hits || s.renewals != a.renewals || s.renewalsOK != a.renewalsOK {
		t.Errorf("lock figures %+v, want node A's %+v: write permits counted as locks", s, a)
	}
	if s.permits != 11 || s.permitWaits != 7 || s.writesPeak != 3 || !s.peakSeen {
		t.Errorf("permits %v waits %v peak %v (seen %v), want 11, 7, 3", s.permits, s.permitWaits, s.writesPeak, s.peakSeen)
	}
	if a.peakSeen {
		t.Error("a node without seckill_order_writes_peak: peak seen")
	}
}
