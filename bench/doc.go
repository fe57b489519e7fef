// Package bench measures lockgate against its Go peers side by side, on
// redis-servers it starts itself on loopback, and writes a Markdown report.
//
// Every measurement is defined where it is taken:
//
//   - floor.go: the floor, SET key tok NX PX then an EVALSHA
//     compare-and-delete through go-redis, on a distinct key per cycle.
//   - uncontended.go: Lock+Unlock cycles on a distinct key per cycle per
//     goroutine at concurrency 1, 16 and 64, as a ratio to the floor of the
//     same repetition.
//   - contended.go: 32 goroutines over 3 Lockers (3 clients, as 3 nodes) on
//     one key, with a critical section of 0 and 2ms: handoffs, fairness,
//     waits, commands per acquisition and a mutual-exclusion check.
//   - middleware.go: a Fiber v2 route and a net/http route with and without
//     lockgate's adapters, driven by a load generator in the process.
//   - peers.go: how every locker is configured, and how it waits.
//   - report.go: the tables.
//
// Configurations run interleaved (A B C A B C …) for Config.Reps
// repetitions; the report gives medians with the min–max over repetitions.
package bench
