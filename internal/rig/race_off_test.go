//go:build !race

package rig

// wallScale is the scaled wall clock the virtual clock is compared with (at
// x200 a loaded host sometimes left the lanes' priming unfinished at the end
// of the warm-up: "warm-up too short").
const wallScale = 100
