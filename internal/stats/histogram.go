package stats

import (
	"encoding/json"
	"fmt"
	"math"
)

// Histogram is a Prometheus-style cumulative histogram: Cumulative[i] counts
// the observations <= Upper[i], and the last bound is +Inf.
type Histogram struct {
	Upper      []float64 // bucket upper bounds, ascending, last is +Inf
	Cumulative []float64 // cumulative counts per bound
	Count, Sum float64
}

// FromCounts is the histogram with the given bounds whose i-th bucket
// (above Upper[i-1], at most Upper[i]) holds counts[i]; buckets past the end
// of counts hold none. Sum is left 0.
func FromCounts(upper, counts []float64) Histogram {
	h := Histogram{Upper: upper, Cumulative: make([]float64, len(upper))}
	run := 0.0
	for i := range upper {
		if i < len(counts) {
			run += counts[i]
		}
		h.Cumulative[i] = run
	}
	h.Count = run
	return h
}

// Empty reports whether the histogram has no buckets at all (the zero value).
func (h Histogram) Empty() bool { return len(h.Upper) == 0 }

// SameBounds reports whether two histograms have identical bucket bounds.
func (h Histogram) SameBounds(o Histogram) bool {
	if len(h.Upper) != len(o.Upper) {
		return false
	}
	for i, u := range h.Upper {
		if u != o.Upper[i] {
			return false
		}
	}
	return true
}

// Clone returns a copy that shares no memory with h.
func (h Histogram) Clone() Histogram {
	return Histogram{
		Upper:      append([]float64(nil), h.Upper...),
		Cumulative: append([]float64(nil), h.Cumulative...),
		Count:      h.Count,
		Sum:        h.Sum,
	}
}

// Add returns h + o bucket by bucket. Adding to or from an empty histogram
// returns a copy of the other one; otherwise the bounds must be the same.
func (h Histogram) Add(o Histogram) (Histogram, error) {
	return h.combine(o, 1)
}

// Sub returns h - o bucket by bucket, the delta between two scrapes of one
// histogram. Subtracting an empty histogram returns a copy of h; otherwise the
// bounds must be the same. It does not check for resets: a bucket that went
// down gives a negative count (see Decreased).
func (h Histogram) Sub(o Histogram) (Histogram, error) {
	if h.Empty() && !o.Empty() {
		return Histogram{}, fmt.Errorf("cannot subtract a histogram with %d buckets from an empty one: take deltas between two scrapes of the same series", len(o.Upper))
	}
	return h.combine(o, -1)
}

func (h Histogram) combine(o Histogram, sign float64) (Histogram, error) {
	if o.Empty() {
		return h.Clone(), nil
	}
	if h.Empty() {
		return o.Clone(), nil
	}
	if !h.SameBounds(o) {
		return Histogram{}, fmt.Errorf("histogram bucket bounds differ (%v vs %v): only histograms with the same buckets can be combined", h.Upper, o.Upper)
	}
	if len(h.Cumulative) != len(h.Upper) || len(o.Cumulative) != len(o.Upper) {
		return Histogram{}, fmt.Errorf("histogram has %d bounds but %d counts: each bound needs one cumulative count", len(h.Upper), len(h.Cumulative))
	}
	r := h.Clone()
	for i := range r.Cumulative {
		r.Cumulative[i] += sign * o.Cumulative[i]
	}
	r.Count += sign * o.Count
	r.Sum += sign * o.Sum
	return r, nil
}

// Decreased reports whether any count in h is below the one in an earlier
// scrape prev, which means the series was reset (an engine restart).
func (h Histogram) Decreased(prev Histogram) bool {
	if h.Count < prev.Count {
		return true
	}
	if !h.SameBounds(prev) {
		return false
	}
	for i, c := range h.Cumulative {
		if i < len(prev.Cumulative) && c < prev.Cumulative[i] {
			return true
		}
	}
	return false
}

// Quantile interpolates linearly within the bucket holding rank q*Count, as
// Prometheus' histogram_quantile does (the lowest bucket starts at 0, or at
// its bound when that bound is negative). It returns the bucket's edges too.
// A quantile in the +Inf bucket returns the last finite bound, with
// bucketLo at that bound and bucketHi = +Inf. ok is false when there are no
// observations, q is outside [0, 1], or there is no finite bound.
func (h Histogram) Quantile(q float64) (v, bucketLo, bucketHi float64, ok bool) {
	n := len(h.Upper)
	if n == 0 || len(h.Cumulative) != n || !(q >= 0 && q <= 1) {
		return 0, 0, 0, false
	}
	return quantile(h.Upper, h.Cumulative, q)
}

// quantile is Quantile on raw slices, so the bootstrap can use a reused buffer.
// Counts are made monotonic on the fly (as Prometheus does), so a small dip
// from scrapes of several targets at slightly different moments is tolerated.
func quantile(upper, cum []float64, q float64) (v, lo, hi float64, ok bool) {
	n := len(upper)
	total := 0.0
	for _, c := range cum {
		total = math.Max(total, c)
	}
	if total <= 0 || math.IsNaN(total) {
		return 0, 0, 0, false
	}
	rank := q * total
	prev, b := 0.0, -1
	for i := range n {
		c := math.Max(cum[i], prev)
		// The first bucket reaching the rank; for q=0 the first non-empty one.
		if c >= rank && c > 0 && (rank > 0 || c > prev) {
			b = i
			break
		}
		prev = c
	}
	if b < 0 {
		return 0, 0, 0, false
	}
	if math.IsInf(upper[b], 1) {
		if b == 0 {
			return 0, 0, 0, false
		}
		return upper[b-1], upper[b-1], upper[b], true
	}
	lo, hi = 0, upper[b]
	if b > 0 {
		lo = upper[b-1]
	} else if hi <= 0 {
		return hi, hi, hi, true
	}
	count := math.Max(cum[b], prev) - prev
	return lo + (hi-lo)*(rank-prev)/count, lo, hi, true
}

// MarshalJSON writes the histogram with its +Inf bound as the string "+Inf".
func (h Histogram) MarshalJSON() ([]byte, error) {
	j := histogramJSON{Upper: make([]Number, len(h.Upper)), Cumulative: h.Cumulative, Count: h.Count, Sum: Number(h.Sum)}
	for i, u := range h.Upper {
		j.Upper[i] = Number(u)
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (h *Histogram) UnmarshalJSON(b []byte) error {
	var j histogramJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*h = Histogram{Upper: make([]float64, len(j.Upper)), Cumulative: j.Cumulative, Count: j.Count, Sum: float64(j.Sum)}
	for i, u := range j.Upper {
		h.Upper[i] = float64(u)
	}
	return nil
}

type histogramJSON struct {
	Upper      []Number  `json:"upper"`
	Cumulative []float64 `json:"cumulative"`
	Count      float64   `json:"count"`
	Sum        Number    `json:"sum"`
}
