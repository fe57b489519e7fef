package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lockgate/lockgate/example/seckill"
)

// The Prometheus names of the otellock metrics the demo reads, as the
// OpenTelemetry Prometheus exporter writes them: dots become underscores,
// the unit "s" becomes the suffix _seconds, and counters get _total (the
// unit "{renewal}" is an annotation and adds nothing).
const (
	metricAcquire  = "lockgate_lock_acquire_duration_seconds" // histogram; pattern, outcome
	metricRenewals = "lockgate_lock_renewals_total"           // counter; pattern, outcome
)

// lockStats are the lock figures of one demo mode: the otellock metrics of
// every node, summed over the nodes, the patterns and (for the wait
// quantiles) the outcomes. The zero value has seen nothing.
type lockStats struct {
	acquires float64 // Lock/TryLock calls, all outcomes
	hits     float64 // of them acquired or reentered
	// cum maps the finite upper bounds of the acquire histogram's buckets
	// to their cumulative counts (nil: no histogram seen); the +Inf
	// bucket is acquires.
	cum        map[float64]float64
	renewals   float64 // watchdog renewals, all outcomes
	renewalsOK float64
	// The write limit (serve -write-limit, -count-writes): permits are
	// the write permits taken (acquired), kept out of the lock figures
	// above; permitWaits the orders that waited for one (summed over the
	// nodes); writesPeak the highest count of order writes in progress
	// across the nodes (the highest of the nodes', valid when peakSeen).
	permits     float64
	permitWaits float64
	writesPeak  float64
	peakSeen    bool
}

// add parses one node's /metrics (Prometheus text format) into s.
func (s *lockStats) add(r io.Reader) error {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return err
	}
	if f := fams[metricAcquire]; f != nil {
		if f.GetType() != dto.MetricType_HISTOGRAM {
			return fmt.Errorf("%s is a %v, want a histogram", metricAcquire, f.GetType())
		}
		if s.cum == nil {
			s.cum = map[float64]float64{}
		}
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			n := float64(h.GetSampleCount())
			if label(m, "pattern") == seckill.WritePattern {
				// A write permit, not an order lock.
				if label(m, "outcome") == "acquired" {
					s.permits += n
				}
				continue
			}
			s.acquires += n
			switch label(m, "outcome") {
			case "acquired", "reentered":
				s.hits += n
			}
			for _, b := range h.GetBucket() {
				// The +Inf bucket, if the parser keeps it, is the
				// sample count, added above.
				if ub := b.GetUpperBound(); !math.IsInf(ub, +1) {
					s.cum[ub] += float64(b.GetCumulativeCount())
				}
			}
		}
	}
	if f := fams[metricRenewals]; f != nil {
		if f.GetType() != dto.MetricType_COUNTER {
			return fmt.Errorf("%s is a %v, want a counter", metricRenewals, f.GetType())
		}
		for _, m := range f.GetMetric() {
			if label(m, "pattern") == seckill.WritePattern {
				continue
			}
			v := m.GetCounter().GetValue()
			s.renewals += v
			if label(m, "outcome") == "ok" {
				s.renewalsOK += v
			}
		}
	}
	if f := fams[metricPermitWaits]; f != nil {
		for _, m := range f.GetMetric() {
			s.permitWaits += m.GetCounter().GetValue()
		}
	}
	if f := fams[metricWritesPeak]; f != nil {
		for _, m := range f.GetMetric() {
			s.writesPeak = max(s.writesPeak, m.GetGauge().GetValue())
			s.peakSeen = true
		}
	}
	return nil
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// hitRate is the share of Lock/TryLock calls that got the lock (acquired
// or reentered), or NaN when there were none.
func (s lockStats) hitRate() float64 { return ratio(s.hits, s.acquires) }

// renewalRate is the share of watchdog renewals that succeeded, or NaN
// when there were none.
func (s lockStats) renewalRate() float64 { return ratio(s.renewalsOK, s.renewals) }

func ratio(n, d float64) float64 {
	if d == 0 {
		return math.NaN()
	}
	return n / d
}

// waitQuantile estimates the q-quantile (seconds) of the time spent in
// Lock/TryLock, all outcomes, from the summed histogram buckets; NaN when
// nothing was observed.
func (s lockStats) waitQuantile(q float64) float64 {
	bounds := make([]float64, 0, len(s.cum)+1)
	for ub := range s.cum {
		bounds = append(bounds, ub)
	}
	slices.Sort(bounds)
	counts := make([]float64, 0, len(bounds)+1)
	for _, ub := range bounds {
		counts = append(counts, s.cum[ub])
	}
	return bucketQuantile(q, append(bounds, math.Inf(+1)), append(counts, s.acquires))
}

// bucketQuantile is Prometheus' histogram_quantile on one histogram:
// bounds are the buckets' upper bounds in increasing order, the last +Inf,
// and counts their cumulative counts. The quantile is interpolated
// linearly within the bucket where its rank falls, the first bucket
// starting at 0 (if its bound is positive); a rank in the +Inf bucket
// gives the largest finite bound. NaN without observations or without a
// finite bucket.
func bucketQuantile(q float64, bounds, counts []float64) float64 {
	n := len(bounds)
	if n < 2 || len(counts) != n || !math.IsInf(bounds[n-1], +1) || math.IsNaN(q) {
		return math.NaN()
	}
	switch {
	case q < 0:
		return math.Inf(-1)
	case q > 1:
		return math.Inf(+1)
	}
	total := counts[n-1]
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	b := 0
	for b < n-1 && counts[b] < rank {
		b++
	}
	if b == n-1 {
		return bounds[n-2]
	}
	if b == 0 && bounds[0] <= 0 {
		return bounds[0]
	}
	start, count := 0.0, counts[b]
	if b > 0 {
		start = bounds[b-1]
		count -= counts[b-1]
		rank -= counts[b-1]
	}
	if count <= 0 { // q = 0 on empty leading buckets
		return start
	}
	return start + (bounds[b]-start)*(rank/count)
}

// Renderings of the figures for the demo's table ("n/a" for NaN).
func fmtPercent(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return strconv.FormatFloat(100*v, 'f', 1, 64) + "%"
}

func fmtSeconds(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmtDur(time.Duration(v * float64(time.Second)))
}

func fmtCount(v float64, seen bool) string {
	if !seen {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// scrapeLockStats reads /metrics of each node and sums them.
func scrapeLockStats(ctx context.Context, urls []string) (lockStats, error) {
	var s lockStats
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	for _, u := range urls {
		if err := scrapeInto(ctx, client, u+"/metrics", &s); err != nil {
			return s, fmt.Errorf("scrape %s/metrics: %w", u, err)
		}
	}
	return s, nil
}

func scrapeInto(ctx context.Context, client *http.Client, url string, s *lockStats) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// The text format: the parser reads nothing else.
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return s.add(resp.Body)
}
