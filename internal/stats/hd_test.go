package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestHarrellDavis: equal weights give the classic estimator, a value drawn
// twice weighs as two, and on few values from a known distribution its
// P90 is near the true one where the plain quantile reads low.
func TestHarrellDavis(t *testing.T) {
	if v, ok := HarrellDavis(0.9, []float64{3, 3, 3}, []float64{1, 1, 1}); !ok || math.Abs(v-3) > 1e-12 {
		t.Errorf("equal values: %g, %v; want 3", v, ok)
	}
	if _, ok := HarrellDavis(0.9, []float64{1}, []float64{0}); ok {
		t.Error("no weight: want not ok")
	}
	// weights 2 on one value equal that value listed twice with weight 1
	a, _ := HarrellDavis(0.5, []float64{1, 2, 4}, []float64{1, 2, 1})
	b, _ := HarrellDavis(0.5, []float64{1, 2, 2, 4}, []float64{1, 1, 1, 1})
	if math.Abs(a-b) > 0.05 {
		t.Errorf("weight 2 gives %g, the value twice %g", a, b)
	}
	// the median of a symmetric sample is its middle
	if m, _ := HarrellDavis(0.5, []float64{1, 2, 3, 4, 5}, []float64{1, 1, 1, 1, 1}); math.Abs(m-3) > 1e-9 {
		t.Errorf("median of 1..5: %g, want 3", m)
	}
	// 10 values from a standard normal, 2000 times: the P90's mean
	// (1.2816) against the plain quantile's (the 9th value: about 1.00)
	rng := rand.New(rand.NewPCG(3, 4))
	const trials = 2000
	xs, ws := make([]float64, 10), make([]float64, 10)
	for i := range ws {
		ws[i] = 1
	}
	hd, plain := 0.0, 0.0
	for range trials {
		for i := range xs {
			xs[i] = rng.NormFloat64()
		}
		slices.Sort(xs)
		v, _ := HarrellDavis(0.9, xs, ws)
		hd += v / trials
		plain += xs[8] / trials
	}
	if math.Abs(hd-1.2816) > 0.1 {
		t.Errorf("Harrell-Davis P90 of 10 normals averages %.3f, want about 1.28", hd)
	}
	if plain > 1.05 {
		t.Errorf("setup: the plain P90 of 10 normals averages %.3f, expected about 1.00", plain)
	}
}
