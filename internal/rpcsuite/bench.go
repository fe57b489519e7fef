package rpcsuite

import (
	"testing"
	"time"
)

// Interleave measures variants of one operation against each other in the
// same run, as the interceptors' benchmarks do: it has each of ops run b.N
// calls, a block of block calls of each in turn (op(n) makes n calls), so
// that the machine's drift (other load, CPU frequency, the GC) hits them
// alike, and returns the total time of each, in the order of ops. The
// timer is reset before the first block and stopped after the last. An op
// that fails calls b.Fatal itself. An op loops itself so that a variant
// as cheap as an inlined call is measured as such (Repeat makes one of a
// call for which an indirect call per call does not matter).
func Interleave(b *testing.B, block int, ops ...func(n int)) []time.Duration {
	total := make([]time.Duration, len(ops))
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		n := min(block, b.N-done)
		for k, op := range ops {
			t0 := time.Now()
			op(n)
			total[k] += time.Since(t0)
		}
	}
	b.StopTimer()
	return total
}

// Repeat is the op of Interleave that calls call n times.
func Repeat(call func()) func(n int) {
	return func(n int) {
		for range n {
			call()
		}
	}
}

// PerCall reports d, the total time of b.N calls, per call in
// nanoseconds, as the metric unit ("ns/call-with", ...).
func PerCall(b *testing.B, d time.Duration, unit string) {
	b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), unit)
}
