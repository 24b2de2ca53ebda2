package verdict

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
)

// itlBounds are SGLang's inter-token latency buckets, in part.
var itlBounds = []float64{0.006, 0.008, 0.01, 0.015, 0.02, 0.04, 0.1, 0.2, 0.4, 0.6, 1, inf}

// itlWindows are n windows reporting per-token latency only (as SGLang
// does): fast tokens in (0.008, 0.01] at 0.01 s and pause tokens in
// (0.4, 0.6] at 0.5 s, with the histogram's sum.
func itlWindows(n int, fast, pause func(i int) float64) []signal.Window {
	ws := make([]signal.Window, n)
	for i := range ws {
		f, p := fast(i), pause(i)
		h := hist(itlBounds, []float64{0, 0, f, 0, 0, 0, 0, 0, 0, p})
		h.Sum = 0.01*f + 0.5*p
		ws[i] = signal.Window{
			Start: time.Duration(i) * time.Minute, End: time.Duration(i+1) * time.Minute,
			Hist:    map[string]stats.Histogram{signal.TTFT: hist(ttftBounds, fastTTFT), signal.ITL: h},
			Counter: map[string]float64{signal.HTTP4xx: 0, signal.HTTP5xx: 0, signal.RequestsAborted: 0},
		}
	}
	return ws
}

func constant(v float64) func(int) float64 { return func(int) float64 { return v } }

// TestDerivedInteractivityCountsPauses: 95 of every 100 tokens come 0.01 s
// apart and 5 wait 0.5 s behind a prefill batch. The per-token P90 is 0.01 s
// (100 tokens/s), which would pass a 40 tokens/s bar; each request's own
// time per output token is 0.0345 s (29 tokens/s), which fails it. The part
// is judged on the per-request figure and says it was derived.
func TestDerivedInteractivityCountsPauses(t *testing.T) {
	const n = 12
	b := Bar{TTFTP90: 5.3, InteractivityP90: 40, ErrorRate: 0.02}
	ws := itlWindows(n, constant(95), constant(5))

	hs := make([]stats.Histogram, n)
	for i, w := range ws {
		hs[i] = w.Hist[signal.ITL]
	}
	pooled, _ := stats.Pool(hs)
	if _, _, hi, _ := pooled.Quantile(0.9); 1/hi < b.InteractivityP90 {
		t.Fatalf("setup: the per-token P90's bucket ends at %g s (%g tokens/s), not a pass of %g tokens/s", hi, 1/hi, b.InteractivityP90)
	}

	st := Judge(b, ws, load(n, 100, 100), DefaultOptions())
	p, _ := st.Part(PartInteractivity)
	if p.Verdict != Fail {
		t.Errorf("interactivity %s %v, want fail on the per-request figure", p.Verdict, p.Value)
	}
	if want := 1 / 0.0345; math.Abs(p.Value.Center-want) > 1e-9 {
		t.Errorf("center %g tokens/s, want %g (100 tokens over 3.45 s of decode)", p.Value.Center, want)
	}
	if p.Source != DerivedSource || p.Derived != signal.DerivedTPOT {
		t.Errorf("source %q derived %q: the part must say it was derived", p.Source, p.Derived)
	}
	if len(st.Missing) != 0 {
		t.Errorf("missing %q: a derived figure is not a missing one", st.Missing)
	}
}

// TestDerivedInteractivityInterval: windows whose mean time per output token
// differs; the center is the token-weighted P90 over windows (Harrell-Davis)
// and the interval, from the bootstrap over windows, holds it.
func TestDerivedInteractivityInterval(t *testing.T) {
	const n = 20
	// pauses 0..3 per 100 tokens: means 0.01 to 0.0247 s per token.
	ws := itlWindows(n, func(i int) float64 { return 100 - float64(i%4) }, func(i int) float64 { return float64(i % 4) })
	st := Judge(Bar{TTFTP90: 5.3, InteractivityP90: 30, ErrorRate: 0.02}, ws, load(n, 100, 100), DefaultOptions())
	p, _ := st.Part(PartInteractivity)
	// 40.5 tokens/s is the slowest quarter of the tokens, 47.6 the next:
	// the P90 of 20 windows, 5 of each, lies between them, near the slowest
	vs, w := make([]float64, n), make([]float64, n)
	for i := range vs {
		vs[i], w[i] = (0.01*float64(100-i%4)+0.5*float64(i%4))/100, 100
	}
	slices.Sort(vs)
	want, _ := stats.HarrellDavis(0.9, vs, w)
	if math.Abs(p.Value.Center-1/want) > 1e-9 || !(p.Value.Center > 40.48 && p.Value.Center < 42) {
		t.Errorf("center %g, want %g: near the windows holding the slowest tokens (40.5)", p.Value.Center, 1/want)
	}
	if !(p.Value.Lo <= p.Value.Center && p.Value.Center <= p.Value.Hi) || p.Verdict != Pass {
		t.Errorf("interactivity %s %v, want a pass whose interval holds its center", p.Verdict, p.Value)
	}
	if p.Bucket != [2]float64{p.Value.Center, p.Value.Center} {
		t.Errorf("bucket %v: a mean has no bucket", p.Bucket)
	}
}

// TestDerivedInteractivityNeedsItsSum: an ITL histogram without a sum (or
// missing from a window) cannot give the per-request figure; a measured TPOT
// always wins over the derived one.
func TestDerivedInteractivityNeedsItsSum(t *testing.T) {
	const n = 10
	cases := []struct {
		name    string // what the case shows
		edit    func(ws []signal.Window)
		verdict Verdict
		source  string
	}{
		// no sum anywhere: no data, never a pass on the buckets alone.
		{"no sum", func(ws []signal.Window) {
			for i := range ws {
				h := ws[i].Hist[signal.ITL]
				h.Sum = 0
				ws[i].Hist[signal.ITL] = h
			}
		}, NoData, signal.TPOT},
		// one window without the histogram: judged on the rest, cannot pass.
		{"one window missing", func(ws []signal.Window) { delete(ws[3].Hist, signal.ITL) }, NoData, DerivedSource},
		// a per-request TPOT is judged on as it is, ITL or not.
		{"tpot wins", func(ws []signal.Window) {
			for i := range ws {
				ws[i].Hist[signal.TPOT] = hist(tpotBounds, fastTPOT)
			}
		}, Pass, signal.TPOT},
	}
	for _, c := range cases {
		ws := itlWindows(n, constant(100), constant(0))
		c.edit(ws)
		st := Judge(bar, ws, load(n, 100, 100), DefaultOptions())
		p, _ := st.Part(PartInteractivity)
		if p.Verdict != c.verdict || p.Source != c.source {
			t.Errorf("%s: %s from %q, want %s from %q (%v)", c.name, p.Verdict, p.Source, c.verdict, c.source, p.Value)
		}
		if c.source == signal.TPOT && p.Derived != "" {
			t.Errorf("%s: derived %q on a measured figure", c.name, p.Derived)
		}
	}
}

// TestWeightedP90: the P90 over windows weighs each by its tokens, a window
// drawn twice as two, and lies within the windows' values.
func TestWeightedP90(t *testing.T) {
	ws := []windowTPOT{{0.03, 50}, {0.01, 50}, {0.02, 50}, {0.015, 50}}
	all, _ := weightedP90(ws, []int{0, 1, 2, 3})
	if want, _ := stats.HarrellDavis(0.9, []float64{0.01, 0.015, 0.02, 0.03}, []float64{50, 50, 50, 50}); math.Abs(all-want) > 1e-15 {
		t.Errorf("equal tokens: %g, want the Harrell-Davis P90 %g", all, want)
	}
	if !(all > 0.02 && all < 0.03) {
		t.Errorf("P90 of 4 windows %g: want between the two slowest", all)
	}
	twice, _ := weightedP90(ws, []int{0, 0, 1, 2, 3})
	heavy, _ := weightedP90([]windowTPOT{{0.03, 100}, {0.01, 50}, {0.02, 50}, {0.015, 50}}, []int{0, 1, 2, 3})
	if !(twice > all) || !(heavy > all) {
		t.Errorf("the slowest window drawn twice %g, or with twice the tokens %g: want slower than %g", twice, heavy, all)
	}
	if _, ok := weightedP90([]windowTPOT{{0.01, 0}}, []int{0}); ok {
		t.Error("no tokens: want not ok")
	}
}
