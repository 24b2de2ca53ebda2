package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

func TestBootstrapReproducible(t *testing.T) {
	data := []float64{3.1, 1.4, 4.1, 1.5, 5.9, 9.2, 2.6, 6.5, 5.3, 3.5, 5.8, 8.9}
	mean := func(idx []int) (float64, bool) {
		s := 0.0
		for _, i := range idx {
			s += data[i]
		}
		return s / float64(len(idx)), true
	}
	cases := []struct {
		name string // what the case shows
		o    BootstrapOptions
	}{
		{"plain", BootstrapOptions{Seed: 7, Block: 1}},                       // single windows
		{"automatic blocks", BootstrapOptions{Seed: 7}},                      // BlockLength(12) = 2
		{"moving blocks", BootstrapOptions{Seed: 7, Block: 3}},               // blocks of 3
		{"block longer than the data", BootstrapOptions{Seed: 7, Block: 50}}, // clamped to n
	}
	for _, c := range cases {
		lo1, hi1, ok1 := Bootstrap(len(data), mean, c.o)
		lo2, hi2, ok2 := Bootstrap(len(data), mean, c.o)
		if !ok1 || !ok2 || lo1 != lo2 || hi1 != hi2 {
			t.Errorf("%s: same seed gave [%g, %g] and [%g, %g]", c.name, lo1, hi1, lo2, hi2)
		}
		if c.o.Block < len(data) && !(lo1 < 4.81 && 4.82 < hi1) {
			t.Errorf("%s: interval [%g, %g] does not hold the sample mean 4.82", c.name, lo1, hi1)
		}
	}
	o := BootstrapOptions{Seed: 8, Block: 1}
	lo3, hi3, _ := Bootstrap(len(data), mean, o)
	lo1, hi1, _ := Bootstrap(len(data), mean, BootstrapOptions{Seed: 7, Block: 1})
	if lo3 == lo1 && hi3 == hi1 {
		t.Error("a different seed gave the very same interval")
	}
}

func TestBootstrapSkipsUnmeasurable(t *testing.T) {
	cases := []struct {
		name   string // what the case shows
		n      int
		stat   func([]int) (float64, bool)
		wantOK bool
	}{
		// no units at all.
		{"n=0", 0, func([]int) (float64, bool) { return 1, true }, false},
		// every resample is unmeasurable (all windows empty).
		{"never measurable", 5, func([]int) (float64, bool) { return 0, false }, false},
		// resamples that hit only window 0 are skipped, the rest count.
		{"mostly measurable", 5, func(idx []int) (float64, bool) {
			for _, i := range idx {
				if i != 0 {
					return 1, true
				}
			}
			return 0, false
		}, true},
	}
	for _, c := range cases {
		if _, _, ok := Bootstrap(c.n, c.stat, BootstrapOptions{Resamples: 200}); ok != c.wantOK {
			t.Errorf("%s: ok = %v, want %v", c.name, ok, c.wantOK)
		}
	}
}

func TestWilson(t *testing.T) {
	cases := []struct {
		name   string // what the case shows
		k, n   int
		lo, hi float64
	}{
		{"no errors in 100", 0, 100, 0, 0.0370}, // upper bound z²/(n+z²)
		{"10 in 100", 10, 100, 0.0552, 0.1744},  // textbook value
		{"all of them", 20, 20, 0.8389, 1},      // mirror of 0 in 20
		{"no trials says nothing", 0, 0, 0, 1},  // [0, 1]
	}
	for _, c := range cases {
		lo, hi := Wilson(c.k, c.n, 0.95)
		if math.Abs(lo-c.lo) > 1e-3 || math.Abs(hi-c.hi) > 1e-3 {
			t.Errorf("%s: Wilson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", c.name, c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
}

// simBounds are 20 finite bucket bounds, geometric like vLLM's TTFT buckets.
func simBounds() []float64 {
	u := make([]float64, 0, 21)
	for k := range 20 {
		u = append(u, 0.1*math.Pow(1.3, float64(k)))
	}
	return append(u, math.Inf(1))
}

// trueP90 is the P90 a histogram with infinitely many observations from a
// log-normal(0, sigma) would interpolate: the target of the estimator.
func trueP90(upper []float64, sigma float64) (v, blo, bhi float64) {
	d := distuv.LogNormal{Mu: 0, Sigma: sigma}
	cum := make([]float64, len(upper))
	for i, u := range upper {
		cum[i] = 1
		if !math.IsInf(u, 1) {
			cum[i] = d.CDF(u)
		}
	}
	v, blo, bhi, _ = Histogram{Upper: upper, Cumulative: cum, Count: 1}.Quantile(0.9)
	return v, blo, bhi
}

// simWindows draws n windows of m log-normal latencies each. With phi > 0 a
// window's log-scale follows an AR(1) with stationary sd tau, so neighbouring
// windows are alike, as minutes of one conversation are; the mixture is then
// log-normal with sigma sqrt(s²+tau²).
func simWindows(rng *rand.Rand, upper []float64, n, m int, s, phi, tau float64) []Histogram {
	hs := make([]Histogram, n)
	eta := rng.NormFloat64() * tau
	for w := range n {
		if w > 0 {
			eta = phi*eta + math.Sqrt(1-phi*phi)*tau*rng.NormFloat64()
		}
		counts := make([]float64, len(upper))
		for range m {
			x := math.Exp(eta + s*rng.NormFloat64())
			for b, u := range upper {
				if x <= u {
					counts[b]++
					break
				}
			}
		}
		for b := 1; b < len(counts); b++ {
			counts[b] += counts[b-1]
		}
		hs[w] = Histogram{Upper: upper, Cumulative: counts, Count: float64(m)}
	}
	return hs
}

// TestBootstrapCoverage measures how often the 95% interval of a pooled P90
// holds the true P90, for independent windows and for correlated ones, with
// plain and moving-block resampling. It logs every figure and asserts only a
// loose band for the independent case, where the bootstrap is valid.
func TestBootstrapCoverage(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	upper := simBounds()
	const trials, windows, perWindow, sigma = 300, 20, 100, 0.6
	cases := []struct {
		name     string // what the case simulates
		phi, tau float64
		block    int
		lo, hi   float64 // loose band for the raw interval's coverage; 0,1 = report only
	}{
		{"independent windows, plain", 0, 0, 1, 0.85, 0.99},
		{"correlated windows (phi 0.3), plain", 0.3, 0.3, 1, 0, 1},
		{"correlated windows (phi 0.3), block 3", 0.3, 0.3, 3, 0, 1},
		{"correlated windows (phi 0.7), plain", 0.7, 0.3, 1, 0, 1},
		{"correlated windows (phi 0.7), block 3", 0.7, 0.3, 3, 0, 1},
		{"correlated windows (phi 0.7), block 5", 0.7, 0.3, 5, 0, 1},
	}
	for _, c := range cases {
		rng := rand.New(rand.NewPCG(42, uint64(c.block)))
		truth, _, _ := trueP90(upper, math.Hypot(sigma, c.tau))
		raw, widened := 0, 0
		for trial := range trials {
			hs := simWindows(rng, upper, windows, perWindow, sigma, c.phi, c.tau)
			lo, hi, ok, err := BootstrapQuantile(hs, 0.9, BootstrapOptions{Resamples: 1000, Seed: uint64(trial), Block: c.block})
			if err != nil || !ok {
				t.Fatalf("%s: bootstrap failed: %v", c.name, err)
			}
			pooled, _ := Pool(hs)
			_, blo, bhi, _ := pooled.Quantile(0.9)
			if lo <= truth && truth <= hi {
				raw++
			}
			if math.Min(lo, blo) <= truth && truth <= math.Max(hi, bhi) {
				widened++
			}
		}
		cr, cw := float64(raw)/trials, float64(widened)/trials
		t.Logf("%-40s coverage of 95%% interval: raw %.3f, widened to bucket %.3f (%d trials)", c.name, cr, cw, trials)
		if cr < c.lo || cr > c.hi {
			t.Errorf("%s: raw coverage %.3f outside the loose band [%g, %g]", c.name, cr, c.lo, c.hi)
		}
		if cw < cr {
			t.Errorf("%s: widening lowered coverage (%.3f < %.3f)", c.name, cw, cr)
		}
	}
}

// BenchmarkBootstrapQuantile is the verdict's heaviest use: 2000 resamples of
// 20 windows of 20-bucket histograms.
func BenchmarkBootstrapQuantile(b *testing.B) {
	upper := simBounds()[1:] // 20 bounds including +Inf
	rng := rand.New(rand.NewPCG(1, 2))
	hs := simWindows(rng, upper, 20, 200, 0.6, 0, 0)
	for b.Loop() {
		if _, _, ok, err := BootstrapQuantile(hs, 0.9, BootstrapOptions{Resamples: 2000, Seed: 1}); !ok || err != nil {
			b.Fatal(fmt.Sprint("bootstrap failed: ", err))
		}
	}
}
