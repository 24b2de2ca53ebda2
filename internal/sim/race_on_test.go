//go:build race

package sim

// fastScale under the race detector, which makes every request's HTTP work
// several times slower: at 50 times faster, 20 ms of wall time reads as a
// modelled second and moves TTFT a bucket. 10 keeps the comparison fair
// (the virtual clock of issue 13 will end the dependence on wall time).
const fastScale float64 = 10
