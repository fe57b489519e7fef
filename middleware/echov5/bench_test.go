package echolock_test

import (
	"testing"

	"github.com/lockgate/lockgate/internal/httpsuite"
)

// The shared benchmarks (httpsuite) over this adapter's suite stack: the
// same route bare and behind the middleware, a distinct key per request,
// uncontended, against core's own Lock+Unlock.

func BenchmarkRoute(b *testing.B)     { httpsuite.BenchRoute(b, stack) }
func BenchmarkCoreCycle(b *testing.B) { httpsuite.BenchCoreCycle(b, stack) }

// BenchmarkOverhead reports added/cycle, (locked − plain) ÷ core cycle;
// the target is ≤ 1.2.
func BenchmarkOverhead(b *testing.B) { httpsuite.BenchOverhead(b, stack) }
