//go:build !race

package main

const (
	processScale = 40
	raceSlowdown = 1
)
