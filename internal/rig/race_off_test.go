//go:build !race

package rig

// wallScale is the scaled wall clock the virtual clock is compared with.
const wallScale = 200
