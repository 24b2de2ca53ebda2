package stats

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
)

var inf = math.Inf(1)

func hist(upper []float64, cum []float64) Histogram {
	return Histogram{Upper: upper, Cumulative: cum, Count: cum[len(cum)-1]}
}

func TestQuantile(t *testing.T) {
	h := hist([]float64{1, 2, 4, inf}, []float64{10, 50, 90, 100})
	cases := []struct {
		name        string // what the case shows
		h           Histogram
		q           float64
		v, blo, bhi float64
		ok          bool
	}{
		// rank 90 falls exactly on the top of the (2,4] bucket.
		{"rank on a bucket's top edge", h, 0.9, 4, 2, 4, true},
		// rank 30 is halfway through the 40 observations of (1,2].
		{"interpolated within a bucket", h, 0.3, 1.5, 1, 2, true},
		// the lowest bucket starts at 0, as in Prometheus.
		{"lowest bucket from zero", h, 0.05, 0.5, 0, 1, true},
		// rank 95 is in the +Inf bucket: the last finite bound, open above.
		{"+Inf bucket", h, 0.95, 4, 4, inf, true},
		// q=0 is the lower edge of the first non-empty bucket.
		{"q=0 skips empty buckets", hist([]float64{1, 2, inf}, []float64{0, 5, 5}), 0, 1, 1, 2, true},
		// no observations: nothing to say.
		{"empty", hist([]float64{1, inf}, []float64{0, 0}), 0.9, 0, 0, 0, false},
		// a quantile outside [0,1] is a caller error.
		{"q out of range", h, 1.5, 0, 0, 0, false},
		// only a +Inf bucket: no finite bound to report.
		{"only +Inf", hist([]float64{inf}, []float64{3}), 0.5, 0, 0, 0, false},
		// a dip from scrapes at slightly different moments is made monotonic.
		{"non-monotonic tolerated", hist([]float64{1, 2, 3, inf}, []float64{4, 3, 8, 8}), 0.75, 2.5, 2, 3, true},
	}
	for _, c := range cases {
		v, blo, bhi, ok := c.h.Quantile(c.q)
		if ok != c.ok || (ok && (math.Abs(v-c.v) > 1e-12 || blo != c.blo || bhi != c.bhi)) {
			t.Errorf("%s: Quantile(%g) = %g [%g, %g] %v, want %g [%g, %g] %v", c.name, c.q, v, blo, bhi, ok, c.v, c.blo, c.bhi, c.ok)
		}
	}
}

func TestAddSub(t *testing.T) {
	a := hist([]float64{1, 2, inf}, []float64{1, 3, 4})
	a.Sum = 5
	b := hist([]float64{1, 2, inf}, []float64{2, 2, 6})
	b.Sum = 7
	sum, err := a.Add(b)
	if err != nil || sum.Count != 10 || sum.Sum != 12 || sum.Cumulative[1] != 5 {
		t.Errorf("Add = %+v, %v; want count 10, sum 12, cumulative[1] 5", sum, err)
	}
	back, err := sum.Sub(b)
	if err != nil || back.Count != 4 || back.Cumulative[0] != 1 || back.Sum != 5 {
		t.Errorf("Sub = %+v, %v; want a back", back, err)
	}
	if a.Cumulative[1] != 3 {
		t.Errorf("Add changed its receiver: %v", a.Cumulative)
	}
	if _, err := a.Add(hist([]float64{1, 5, inf}, []float64{0, 0, 0})); err == nil {
		t.Error("Add with different bounds returned no error")
	}
	if _, err := a.Sub(hist([]float64{1, inf}, []float64{0, 0})); err == nil {
		t.Error("Sub with different bounds returned no error")
	}
	if z, err := (Histogram{}).Add(a); err != nil || z.Count != 4 {
		t.Errorf("empty.Add(a) = %+v, %v; want a copy of a", z, err)
	}
	if !b.Decreased(a) {
		t.Error("Decreased did not see bucket le=2 going from 3 to 2")
	}
	if sum.Decreased(a) {
		t.Error("Decreased saw a reset where every count grew")
	}
}

func TestJSONKeepsInfinity(t *testing.T) {
	h := hist([]float64{0.5, inf}, []float64{1, 2})
	s := Summary{Center: 3, Lo: 2, Hi: inf, Confidence: 0.95}
	b, err := json.Marshal(struct {
		H Histogram
		S Summary
	}{h, s})
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		H Histogram
		S Summary
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	if !math.IsInf(back.H.Upper[1], 1) || !math.IsInf(back.S.Hi, 1) || back.S.Center != 3 {
		t.Errorf("round trip lost values: %s -> %+v", b, back)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if _, ok := m["S"].(map[string]any)["value"]; !ok {
		t.Errorf("Summary JSON has no \"value\" key: %s", b)
	}
}

// TestFromCounts: per-bucket counts become cumulative ones, with the count.
func TestFromCounts(t *testing.T) {
	h := FromCounts([]float64{1, 2, math.Inf(1)}, []float64{3, 0, 2})
	if !slices.Equal(h.Cumulative, []float64{3, 3, 5}) || h.Count != 5 {
		t.Errorf("FromCounts gave cumulative %v, count %g; want [3 3 5], 5", h.Cumulative, h.Count)
	}
	if v, _, _, ok := h.Quantile(0.5); !ok || v > 1 {
		t.Errorf("median %g (ok %v), want within the first bucket", v, ok)
	}
}
