//go:build race

package sim

// fastScale under the race detector, which makes every request's HTTP work
// several times slower: at 50 times faster, 20 ms of wall time reads as a
// modelled second and moves TTFT a bucket. 4 keeps the comparison fair on
// a loaded 2-core host (10 moved a bucket there). Runs that must not depend
// on the host at all use the virtual clock (docs/clock.md).
const fastScale float64 = 4
