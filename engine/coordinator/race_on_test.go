//go:build race

package coordinator_test

// raceEnabled: the tests run under the race detector, which slows the
// linearizability checker (plain Go) several times over.
const raceEnabled = true
