//go:build race

package rig

// wallScale is the scaled wall clock the virtual clock is compared with:
// under the race detector every request's work is several times slower,
// and at x200 a lane's priming outran the warm-up on a loaded host.
const wallScale = 40
