//go:build !race

package coordinator_test

// raceEnabled: the tests run under the race detector (see race_on_test.go).
const raceEnabled = false
