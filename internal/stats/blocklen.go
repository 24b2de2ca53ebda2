package stats

import "math"

// AutoBlockLength is the moving-block length for a series of n dependent
// units (a step's windows) chosen from the series itself: the rule of
// Politis and White (2004, "Automatic block-length selection for the
// dependent bootstrap"), with the correction of Patton, Politis and White
// (2009), for the circular and moving-block bootstraps. Where neighbouring
// windows are alike (a queue that builds over the step, a conversation that
// stays long for minutes) the blocks grow, so a resample keeps the run's
// slow swings together instead of shuffling them into a spread that looks
// narrower than the run's.
//
// The series is one number per window whose dependence matters for the
// statistic: for a quantile, how many of the window's observations fall at
// or below the estimate less the quantile's share of them (the estimating
// function a quantile zeroes); for a rate, errors less rate times turns.
//
// The result is never below BlockLength(n), the fixed rule the estimate
// replaces, and never above n/3 (at least three blocks to draw), nor above
// 3 sqrt(n) (Politis and White's bound). Non-finite values, or a constant
// series, give BlockLength(n).
func AutoBlockLength(x []float64) int {
	n := len(x)
	floor := BlockLength(n)
	if n < 8 {
		return floor
	}
	mean, lo, hi := 0.0, x[0], x[0]
	for _, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return floor
		}
		mean += v
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	mean /= float64(n)
	if hi-lo <= 1e-9*math.Max(math.Abs(lo), math.Abs(hi)) {
		return floor // constant but for rounding: nothing to correlate
	}
	acov := func(k int) float64 {
		s := 0.0
		for i := k; i < n; i++ {
			s += (x[i] - mean) * (x[i-k] - mean)
		}
		return s / float64(n)
	}
	r0 := acov(0)
	if !(r0 > 0) {
		return floor
	}
	// The first lag after which K_n autocorrelations in a row are
	// insignificant (|rho| < 2 sqrt(log10(n)/n)) is m; the flat-top lag
	// window is then cut at M = 2m.
	kn := max(5, int(math.Ceil(math.Sqrt(math.Log10(float64(n))))))
	mmax := int(math.Ceil(math.Sqrt(float64(n)))) + kn
	mmax = min(mmax, n-1)
	crit := 2 * math.Sqrt(math.Log10(float64(n))/float64(n))
	// autocovariances r[k] for lags 0..mmax, and autocorrelations rho
	r, rho := make([]float64, mmax+1), make([]float64, mmax+1)
	r[0] = r0
	for k := 1; k <= mmax; k++ {
		r[k] = acov(k)
		rho[k] = r[k] / r0
	}
	m := -1
	for s := 0; s+kn <= mmax; s++ {
		quiet := true
		for j := 1; j <= kn; j++ {
			if math.Abs(rho[s+j]) >= crit {
				quiet = false
				break
			}
		}
		if quiet {
			m = s
			break
		}
	}
	if m < 0 {
		// no run of quiet lags within reach: the last significant lag
		m = 1
		for k := mmax; k >= 1; k-- {
			if math.Abs(rho[k]) >= crit {
				m = k
				break
			}
		}
	}
	bigM := min(2*m, mmax)
	if bigM == 0 {
		return floor
	}
	// the lag window is symmetric: lags -k and k count alike
	g, d := 0.0, r0
	for k := 1; k <= bigM; k++ {
		t := float64(k) / float64(bigM)
		lambda := 1.0
		if t > 0.5 {
			lambda = 2 * (1 - t)
		}
		g += 2 * lambda * float64(k) * r[k]
		d += 2 * lambda * r[k]
	}
	dcb := 4.0 / 3.0 * d * d
	if !(dcb > 0) {
		return floor
	}
	b := math.Pow(2*g*g/dcb, 1.0/3) * math.Cbrt(float64(n))
	top := int(math.Min(3*math.Sqrt(float64(n)), float64(n)/3))
	out := int(math.Ceil(b))
	if math.IsNaN(b) {
		out = floor
	}
	return max(floor, min(out, max(top, floor)))
}

// QuantileScores is the series AutoBlockLength reads for a quantile of
// windowed histograms: for each window, its observations at or below v
// (interpolated linearly within v's bucket, as Quantile interpolates) less
// q times its observations. Windows whose histogram is empty score 0.
func QuantileScores(hs []Histogram, v, q float64) []float64 {
	out := make([]float64, len(hs))
	for w, h := range hs {
		if h.Empty() || len(h.Cumulative) != len(h.Upper) {
			continue
		}
		out[w] = h.countAtOrBelow(v) - q*h.total()
	}
	return out
}

// total is the histogram's observations as its buckets count them.
func (h Histogram) total() float64 {
	t := 0.0
	for _, c := range h.Cumulative {
		t = math.Max(t, c)
	}
	return t
}

// countAtOrBelow is how many observations lie at or below v, interpolated
// linearly within v's bucket (the lowest bucket starts at 0).
func (h Histogram) countAtOrBelow(v float64) float64 {
	prev, lo := 0.0, 0.0
	for i, u := range h.Upper {
		c := math.Max(h.Cumulative[i], prev)
		if v < u {
			if math.IsInf(u, 1) || !(u > lo) || v <= lo {
				return prev
			}
			return prev + (c-prev)*(v-lo)/(u-lo)
		}
		prev, lo = c, u
	}
	return prev
}
