//go:build !race

package study

// underRace is true when the tests run under the race detector (see
// race_on_test.go).
const underRace = false
