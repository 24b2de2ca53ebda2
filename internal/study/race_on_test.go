//go:build race

package study

// underRace is true when the tests run under the race detector. The
// coverage gate then runs a small study (every step ten times slower made
// the whole package take 556 s, close to go test's 10-minute limit) and
// checks that it runs without a race, not its figures: 3 runs cannot
// decide a coverage.
const underRace = true
