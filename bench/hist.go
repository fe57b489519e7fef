package bench

import (
	"math/bits"
	"time"
)

// hist is a log-linear latency histogram with 64 sub-buckets per power of
// two (relative error ≤ 1.6%). Recording does not allocate, so it can sit
// inside the loops whose allocations are counted.
type hist struct {
	n      int64
	counts [histBuckets]uint32
}

const (
	histSubBits = 7 // values below 2^7 ns are exact; above, 64 sub-buckets per octave
	histBuckets = 64*(64-histSubBits) + 128
)

func histIndex(v uint64) int {
	if v < 1<<histSubBits {
		return int(v)
	}
	e := bits.Len64(v) - histSubBits
	return e*64 + int(v>>uint(e))
}

// histValue is the middle of bucket i.
func histValue(i int) time.Duration {
	if i < 1<<histSubBits {
		return time.Duration(i)
	}
	e := i/64 - 1
	m := uint64(i - e*64)
	for m >= 128 { // normalise (cannot happen for indexes histIndex returns)
		m >>= 1
		e++
	}
	lo := m << uint(e)
	return time.Duration(lo + (uint64(1)<<uint(e))/2)
}

func (h *hist) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[histIndex(uint64(d))]++
	h.n++
}

func (h *hist) merge(o *hist) {
	h.n += o.n
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

// quantile returns the q-quantile (0 < q ≤ 1), 0 for an empty histogram.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n) + 0.5)
	rank = max(1, min(rank, h.n))
	var seen int64
	for i, c := range h.counts {
		seen += int64(c)
		if seen >= rank {
			return histValue(i)
		}
	}
	return 0
}
