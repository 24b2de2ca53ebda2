package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// ar1 draws n values of an AR(1) with coefficient phi and unit innovations.
func ar1(rng *rand.Rand, n int, phi float64) []float64 {
	x := make([]float64, n)
	x[0] = rng.NormFloat64() / math.Sqrt(1-phi*phi)
	for i := 1; i < n; i++ {
		x[i] = phi*x[i-1] + rng.NormFloat64()
	}
	return x
}

// medianBlock is AutoBlockLength's median over draws of a series.
func medianBlock(draw func() []float64, draws int) int {
	bs := make([]int, draws)
	for i := range bs {
		bs[i] = AutoBlockLength(draw())
	}
	slices.Sort(bs)
	return bs[draws/2]
}

func TestAutoBlockLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 30
	floor, top := BlockLength(n), int(math.Min(3*math.Sqrt(n), n/3))
	iid := medianBlock(func() []float64 { return ar1(rng, n, 0) }, 201)
	weak := medianBlock(func() []float64 { return ar1(rng, n, 0.5) }, 201)
	strong := medianBlock(func() []float64 { return ar1(rng, n, 0.9) }, 201)
	trend := medianBlock(func() []float64 {
		x := ar1(rng, n, 0)
		for i := range x {
			x[i] += 0.3 * float64(i) // a queue that builds over the step
		}
		return x
	}, 201)
	t.Logf("median block over 201 series of %d windows: independent %d, AR(1) 0.5 %d, AR(1) 0.9 %d, trending %d (floor %d, top %d)", n, iid, weak, strong, trend, floor, top)
	if iid != floor {
		t.Errorf("independent windows: median block %d, want the fixed rule's %d", iid, floor)
	}
	if !(weak >= iid && strong > weak) {
		t.Errorf("blocks should grow with dependence: %d (0), %d (0.5), %d (0.9)", iid, weak, strong)
	}
	if !(trend > weak && trend <= top) {
		t.Errorf("a trending series: median block %d, want above %d (AR(1) 0.5) and at most the top %d (three blocks)", trend, weak, top)
	}
	for _, c := range []struct {
		name string
		x    []float64
		want int
	}{
		{"constant", []float64{2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, BlockLength(10)},
		{"short", []float64{1, 5, 2}, BlockLength(3)},
		{"NaN", append(make([]float64, 20), math.NaN()), BlockLength(21)},
	} {
		if got := AutoBlockLength(c.x); got != c.want {
			t.Errorf("%s: block %d, want %d", c.name, got, c.want)
		}
	}
}

func TestQuantileScores(t *testing.T) {
	up := []float64{1, 2, math.Inf(1)}
	hs := []Histogram{
		{Upper: up, Cumulative: []float64{10, 10, 10}, Count: 10}, // all at or below 1
		{Upper: up, Cumulative: []float64{0, 10, 10}, Count: 10},  // all in (1, 2]
		{},
	}
	got := QuantileScores(hs, 1.5, 0.9)
	want := []float64{10 - 9, 5 - 9, 0}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("window %d: score %g, want %g", i, got[i], want[i])
		}
	}
}
