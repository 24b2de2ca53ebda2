package stats

import (
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// BootstrapOptions say how to resample. Zero values take defaults: 2000
// resamples, moving blocks of BlockLength(n) units and 95% confidence.
type BootstrapOptions struct {
	Resamples  int     // number of resamples; 0 means 2000
	Seed       uint64  // seed of the generator, so intervals are reproducible
	Block      int     // 0 resamples moving blocks of BlockLength(n) units; 1 single units; >1 moving blocks of this many consecutive units
	Confidence float64 // two-sided confidence of the interval; 0 means 0.95
}

func (o BootstrapOptions) withDefaults() BootstrapOptions {
	if o.Resamples <= 0 {
		o.Resamples = 2000
	}
	if o.Block < 0 {
		o.Block = 1
	}
	if !(o.Confidence > 0 && o.Confidence < 1) {
		o.Confidence = 0.95
	}
	return o
}

// Bootstrap resamples n units (windows) with replacement, singly or in moving
// blocks of Block consecutive units (clamped to n; BlockLength(n) when Block
// is 0), and returns the percentile
// interval of stat over the resamples. stat gets the n indices of one resample
// in a buffer it must not keep, and returns ok=false for a resample it cannot
// measure (all chosen windows empty); such resamples are skipped. ok is false
// when n < 1 or fewer than half the resamples could be measured. The same
// seed gives the same interval.
func Bootstrap(n int, stat func(idx []int) (float64, bool), o BootstrapOptions) (lo, hi float64, ok bool) {
	if n < 1 {
		return 0, 0, false
	}
	o = o.withDefaults()
	block := o.Block
	if block == 0 {
		block = BlockLength(n)
	}
	block = min(block, n)
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	idx := make([]int, n)
	vals := make([]float64, 0, o.Resamples)
	starts := n - block + 1
	for range o.Resamples {
		for i := 0; i < n; {
			s := rng.IntN(starts)
			for j := 0; j < block && i < n; j++ {
				idx[i] = s + j
				i++
			}
		}
		if v, ok := stat(idx); ok && !math.IsNaN(v) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 || 2*len(vals) < o.Resamples {
		return 0, 0, false
	}
	slices.Sort(vals)
	a := (1 - o.Confidence) / 2
	return percentile(vals, a), percentile(vals, 1-a), true
}

// percentile interpolates between order statistics of sorted values
// (Hyndman and Fan type 7, the default of R and NumPy).
func percentile(sorted []float64, p float64) float64 {
	h := p * float64(len(sorted)-1)
	i := int(math.Floor(h))
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	lo, hi := sorted[i], sorted[i+1]
	if lo == hi || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		if h == float64(i) {
			return lo
		}
		return hi
	}
	return lo + (h-float64(i))*(hi-lo)
}

// Wilson returns the Wilson score interval for k successes in n trials at the
// given two-sided confidence (0 means 0.95). With n = 0 nothing is known and
// the interval is [0, 1].
func Wilson(k, n int, confidence float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	if !(confidence > 0 && confidence < 1) {
		confidence = 0.95
	}
	k = max(0, min(k, n))
	z := distuv.UnitNormal.Quantile(1 - (1-confidence)/2)
	nf, p := float64(n), float64(k)/float64(n)
	z2 := z * z
	center := (p + z2/(2*nf)) / (1 + z2/nf)
	half := z / (1 + z2/nf) * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	return math.Max(0, center-half), math.Min(1, center+half)
}
