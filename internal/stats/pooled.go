package stats

import "fmt"

// Pool sums histograms (one per window) into one. All must have the same
// bounds; empty ones are skipped.
func Pool(hs []Histogram) (Histogram, error) {
	var sum Histogram
	for i, h := range hs {
		var err error
		if sum, err = sum.Add(h); err != nil {
			return Histogram{}, fmt.Errorf("pooling window %d: %w", i, err)
		}
	}
	return sum, nil
}

// BootstrapQuantile is the percentile interval of the q-quantile of pooled
// histograms: each resample draws windows (see Bootstrap), sums their
// histograms and interpolates the quantile. Histograms must share bounds;
// empty ones count as windows without observations.
func BootstrapQuantile(hs []Histogram, q float64, o BootstrapOptions) (lo, hi float64, ok bool, err error) {
	var upper []float64
	for i, h := range hs {
		if h.Empty() {
			continue
		}
		if upper == nil {
			upper = h.Upper
		} else if !h.SameBounds(Histogram{Upper: upper}) {
			return 0, 0, false, fmt.Errorf("window %d has buckets %v, others %v: bucket bounds must be the same in every window", i, h.Upper, upper)
		}
		if len(h.Cumulative) != len(h.Upper) {
			return 0, 0, false, fmt.Errorf("window %d has %d bounds but %d counts", i, len(h.Upper), len(h.Cumulative))
		}
	}
	if upper == nil {
		return 0, 0, false, nil
	}
	buf := make([]float64, len(upper))
	lo, hi, ok = Bootstrap(len(hs), func(idx []int) (float64, bool) {
		clear(buf)
		for _, w := range idx {
			for b, c := range hs[w].Cumulative {
				buf[b] += c
			}
		}
		v, _, _, ok := quantile(upper, buf, q)
		return v, ok
	}, o)
	return lo, hi, ok, nil
}
