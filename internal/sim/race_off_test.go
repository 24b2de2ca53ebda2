//go:build !race

package sim

// fastScale is the scaled clock TestScaleKeepsVerdicts compares with real
// time: 50 times faster.
const fastScale float64 = 50
