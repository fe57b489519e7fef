//go:build race

package core_test

// raceEnabled: the tests run under the race detector.
const raceEnabled = true
