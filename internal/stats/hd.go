package stats

import (
	"math"

	"gonum.org/v1/gonum/mathext"
)

// HarrellDavis is the p-quantile of values sorted ascending, each counted
// its weight times, by the weighted Harrell-Davis estimator (Harrell and
// Davis 1982; weighted by Akinshin 2023): every value contributes by the
// mass a Beta((n+1)p, (n+1)(1-p)) distribution puts on its share of the
// cumulative weight, n being the weights' effective size (sum w)^2 / sum w^2.
//
// headroom uses it where a tail quantile is read from few values (a P90
// over 10-25 windows): there the plain quantile (the smallest value whose
// cumulative weight reaches p) is the 9th of 10 values, whose expected rank
// in the population is 9/11 = 0.82, not 0.9, so it reads fast; the
// Harrell-Davis estimate's expected rank is about p. It returns false when
// no value has weight.
func HarrellDavis(p float64, sorted, weight []float64) (float64, bool) {
	total, sq := 0.0, 0.0
	for _, w := range weight {
		if w > 0 {
			total += w
			sq += w * w
		}
	}
	if !(total > 0) {
		return 0, false
	}
	n := total * total / sq
	a, b := (n+1)*p, (n+1)*(1-p)
	q, run, prev := 0.0, 0.0, 0.0
	for i, v := range sorted {
		if !(weight[i] > 0) {
			continue
		}
		run += weight[i]
		c := mathext.RegIncBeta(a, b, math.Min(run/total, 1))
		q += (c - prev) * v
		prev = c
	}
	return q, true
}
