//go:build race

package main

// Under the race detector every request's work is several times slower:
// the processes that are signalled or killed run on a slower wall clock (at
// x40 their lanes' priming outran the warm-up), and the simulated sweeps
// get more wall time.
const (
	processScale = 10
	raceSlowdown = 4
)
