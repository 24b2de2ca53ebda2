package verdict

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
)

var (
	inf        = math.Inf(1)
	ttftBounds = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, inf}
	tpotBounds = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, inf}
	bar        = Bar{TTFTP90: 5.3, InteractivityP90: 10, ErrorRate: 0.02}
)

// hist turns per-bucket counts into a cumulative histogram.
func hist(upper, counts []float64) stats.Histogram { return stats.FromCounts(upper, counts) }

// spec describes every window of a step: per-bucket counts (a window-dependent
// wobble is added to the first non-empty bucket so resamples differ) and the
// server's error counters per window.
type spec struct {
	ttft, tpot       []float64
	e4xx, e5xx, abrt float64
}

func (s spec) windows(n int) []signal.Window {
	ws := make([]signal.Window, n)
	for i := range ws {
		wobble := func(c []float64) []float64 {
			c = append([]float64(nil), c...)
			for b := range c {
				if c[b] > 0 {
					c[b] += float64(i % 3)
					break
				}
			}
			return c
		}
		ws[i] = signal.Window{
			Start: time.Duration(i) * 15 * time.Second, End: time.Duration(i+1) * 15 * time.Second,
			Hist: map[string]stats.Histogram{
				signal.TTFT: hist(ttftBounds, wobble(s.ttft)),
				signal.TPOT: hist(tpotBounds, wobble(s.tpot)),
			},
			Counter: map[string]float64{signal.HTTP4xx: s.e4xx, signal.HTTP5xx: s.e5xx, signal.RequestsAborted: s.abrt},
		}
	}
	return ws
}

func load(n, planned, sent int) []LoadWindow {
	ls := make([]LoadWindow, n)
	for i := range ls {
		ls[i] = LoadWindow{Planned: planned, Sent: sent, NotReached: planned - sent}
	}
	return ls
}

var (
	fastTTFT  = []float64{0, 50, 45, 5}                // P90 in (1, 2]
	slowTTFT  = []float64{0, 0, 0, 0, 0, 0, 0, 0, 100} // all in (8, 10]
	closeTTFT = []float64{0, 0, 80, 0, 0, 0, 15, 5}    // P90 in (5, 6], around the 5.3 bar
	fastTPOT  = []float64{0, 0, 100}                   // (0.025, 0.05]: 20-40 tokens/s
	slowTPOT  = []float64{0, 0, 0, 0, 0, 0, 0, 100}    // > 0.2 s per token: < 5 tokens/s
)

func TestJudge(t *testing.T) {
	const n = 20
	good := spec{ttft: fastTTFT, tpot: fastTPOT}
	without := func(ws []signal.Window, hist, counter string, windows ...int) []signal.Window {
		for _, i := range windows {
			delete(ws[i].Hist, hist)
			delete(ws[i].Counter, counter)
		}
		return ws
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	// withITL reports per-token latency only: 0.03 s per token on average
	// (33 tokens/s), in the TPOT histogram's buckets.
	withITL := func(ws []signal.Window) []signal.Window {
		for i := range ws {
			h := ws[i].Hist[signal.TPOT]
			h.Sum = 0.03 * h.Count
			ws[i].Hist[signal.ITL] = h
			delete(ws[i].Hist, signal.TPOT)
		}
		return ws
	}
	zeroTTFT := func(ws []signal.Window) []signal.Window {
		for i := range ws {
			ws[i].Hist[signal.TTFT] = hist(ttftBounds, nil)
		}
		return ws
	}
	cases := []struct {
		name    string // what the case shows
		windows []signal.Window
		load    []LoadWindow
		step    Verdict
		parts   [3]Verdict // ttft, interactivity, errors
		source  string     // interactivity source, when it matters
		missing []string
		warn    string // a step or part warning must contain this
	}{
		// everything well inside the bar, plenty of turns.
		{"pass", good.windows(n), load(n, 100, 100), Pass, [3]Verdict{Pass, Pass, Pass}, signal.TPOT, nil, ""},
		// every TTFT is 8-10 s: a confident fail, which decides the step.
		{"ttft fails", spec{ttft: slowTTFT, tpot: fastTPOT}.windows(n), load(n, 100, 100), Fail, [3]Verdict{Fail, Pass, Pass}, "", nil, ""},
		// streams under 5 tokens/s: interactivity fails.
		{"interactivity fails", spec{ttft: fastTTFT, tpot: slowTPOT}.windows(n), load(n, 100, 100), Fail, [3]Verdict{Pass, Fail, Pass}, "", nil, ""},
		// P90 TTFT in the (5, 6] bucket around the 5.3 s bar: too close, never a pass.
		{"ttft too close", spec{ttft: closeTTFT, tpot: fastTPOT}.windows(n), load(n, 100, 100), TooClose, [3]Verdict{TooClose, Pass, Pass}, "", nil, ""},
		// 5 server errors per 100 turns is 5% against a 2% bar.
		{"errors fail", spec{ttft: fastTTFT, tpot: fastTPOT, e4xx: 3, e5xx: 1, abrt: 1}.windows(n), load(n, 100, 100), Fail, [3]Verdict{Pass, Pass, Fail}, "", nil, ""},
		// 2% errors in some windows only: the interval straddles the bar.
		{"errors too close", func() []signal.Window {
			ws := good.windows(n)
			for i := range ws {
				ws[i].Counter[signal.HTTP5xx] = float64(4 * (i % 2))
			}
			return ws
		}(), load(n, 100, 100), TooClose, [3]Verdict{Pass, Pass, TooClose}, "", nil, ""},
		// no TTFT histogram at all: no data, listed as missing.
		{"ttft missing", without(good.windows(n), signal.TTFT, "", all...), load(n, 100, 100), NoData, [3]Verdict{NoData, Pass, Pass}, "", []string{signal.TTFT}, "missing from every window"},
		// TTFT missing from one window: judged on the rest, but it cannot pass.
		{"ttft missing in one window", without(good.windows(n), signal.TTFT, "", 7), load(n, 100, 100), NoData, [3]Verdict{NoData, Pass, Pass}, "", []string{signal.TTFT}, "missing from 1 of 20 windows"},
		// a TTFT histogram with zero observations is no data.
		{"ttft no observations", zeroTTFT(good.windows(n)), load(n, 100, 100), NoData, [3]Verdict{NoData, Pass, Pass}, "", []string{signal.TTFT}, "no observations"},
		// the server's 5xx counter is missing: errors are no data, never a pass.
		{"error counter missing", without(good.windows(n), "", signal.HTTP5xx, all...), load(n, 100, 100), NoData, [3]Verdict{Pass, Pass, NoData}, "", []string{signal.HTTP5xx}, ""},
		// 94% of planned turns went out: latency is no data (and the 6% unsent fail errors).
		{"low sent fraction", good.windows(n), load(n, 100, 94), Fail, [3]Verdict{NoData, NoData, Fail}, "", nil, "only 94.0% of the planned turns went out"},
		// exactly 95% sent is enough for latency; the 5% not reached still fail errors.
		{"sent fraction at the line", good.windows(n), load(n, 100, 95), Fail, [3]Verdict{Pass, Pass, Fail}, "", nil, ""},
		// no TPOT: interactivity derived per request from ITL's sum and
		// count, and the source says so.
		{"itl derived", withITL(good.windows(n)), load(n, 100, 100), Pass, [3]Verdict{Pass, Pass, Pass}, DerivedSource, nil, "derived from per-token latency"},
		// neither TPOT nor ITL: interactivity no data, both listed.
		{"no interactivity signal", without(good.windows(n), signal.TPOT, "", all...), load(n, 100, 100), NoData, [3]Verdict{Pass, NoData, Pass}, "", []string{signal.TPOT, signal.ITL}, ""},
		// a fail outranks no data in the step verdict.
		{"fail beats no data", without(spec{ttft: slowTTFT, tpot: fastTPOT}.windows(n), signal.TPOT, "", all...), load(n, 100, 100), Fail, [3]Verdict{Fail, NoData, Pass}, "", []string{signal.TPOT, signal.ITL}, ""},
		// no windows at all: nothing passes.
		{"no windows", nil, nil, NoData, [3]Verdict{NoData, NoData, NoData}, "", []string{signal.TTFT, signal.TPOT, signal.ITL, signal.HTTP4xx, signal.HTTP5xx, signal.RequestsAborted}, ""},
		// 3 windows of 10 turns without errors: the bootstrap says 0%, Wilson says up to ~11%,
		// and the interval is never narrower than Wilson's: too close, not a pass.
		{"few turns", good.windows(3), load(3, 10, 10), TooClose, [3]Verdict{Pass, Pass, TooClose}, "", nil, "few turns"},
		// the client saw 10 failures per window that the server never reported.
		{"client/server cross-check", good.windows(n), func() []LoadWindow {
			ls := load(n, 100, 100)
			ls[0].ClientErrors = 10
			return ls
		}(), Pass, [3]Verdict{Pass, Pass, Pass}, "", nil, "cross-check"},
	}
	for _, c := range cases {
		st := Judge(bar, c.windows, c.load, DefaultOptions())
		got := [3]Verdict{}
		var warnings []string
		warnings = append(warnings, st.Warnings...)
		for i, name := range []string{PartTTFT, PartInteractivity, PartErrors} {
			p, ok := st.Part(name)
			if !ok {
				t.Fatalf("%s: step has no %s part", c.name, name)
			}
			got[i] = p.Verdict
			warnings = append(warnings, p.Value.Warnings...)
		}
		if st.Verdict != c.step || got != c.parts {
			t.Errorf("%s: step %s parts %v, want %s %v", c.name, st.Verdict, got, c.step, c.parts)
			for _, p := range st.Parts {
				t.Logf("  %s: %v margin %g bucket %v", p.Name, p.Value, p.Margin, p.Bucket)
			}
		}
		if p, _ := st.Part(PartInteractivity); c.source != "" && p.Source != c.source {
			t.Errorf("%s: interactivity source %q, want %q", c.name, p.Source, c.source)
		}
		if !reflect.DeepEqual(st.Missing, c.missing) {
			t.Errorf("%s: missing %q, want %q", c.name, st.Missing, c.missing)
		}
		if c.warn != "" && !strings.Contains(strings.Join(warnings, "\n"), c.warn) {
			t.Errorf("%s: no warning contains %q: %q", c.name, c.warn, warnings)
		}
	}
}

// TestIntervalNeverNarrowerThanBucket: with identical windows the bootstrap
// interval collapses to a point, and the bucket holding P90 sets its width.
func TestIntervalNeverNarrowerThanBucket(t *testing.T) {
	ws := make([]signal.Window, 10)
	for i := range ws {
		ws[i] = signal.Window{Hist: map[string]stats.Histogram{
			signal.TTFT: hist(ttftBounds, closeTTFT),
			signal.TPOT: hist(tpotBounds, fastTPOT),
		}, Counter: map[string]float64{signal.HTTP4xx: 0, signal.HTTP5xx: 0, signal.RequestsAborted: 0}}
	}
	st := Judge(bar, ws, load(10, 100, 100), DefaultOptions())
	cases := []struct {
		part   string  // which part
		lo, hi float64 // the bucket's edges in the part's unit
	}{
		{PartTTFT, 5, 6},            // P90 TTFT 5.67 in (5, 6]
		{PartInteractivity, 20, 40}, // TPOT in (0.025, 0.05] s: 20-40 tokens/s
	}
	for _, c := range cases {
		p, _ := st.Part(c.part)
		if p.Bucket != [2]float64{c.lo, c.hi} || p.Value.Lo > c.lo || p.Value.Hi < c.hi {
			t.Errorf("%s: value %v bucket %v, want an interval covering [%g, %g]", c.part, p.Value, p.Bucket, c.lo, c.hi)
		}
	}
	if p, _ := st.Part(PartTTFT); p.Verdict != TooClose || math.Abs(p.Margin-(5.3-(5+10.0/15))) > 1e-9 {
		t.Errorf("ttft: %s margin %g, want too_close with margin %g", p.Verdict, p.Margin, 5.3-(5+10.0/15))
	}
}

// TestJudgeReproducible: the same seed gives the same step, bit for bit, and
// the step survives JSON even with an open-ended interval.
func TestJudgeReproducible(t *testing.T) {
	ws := spec{ttft: []float64{0, 50, 30, 5, 0, 0, 0, 0, 0, 15}, tpot: fastTPOT, e5xx: 1}.windows(12)
	a := Judge(bar, ws, load(12, 100, 100), DefaultOptions())
	b := Judge(bar, ws, load(12, 100, 100), DefaultOptions())
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same seed, different steps:\n%+v\n%+v", a, b)
	}
	p, _ := a.Part(PartTTFT)
	if !math.IsInf(p.Value.Hi, 1) || p.Verdict != Fail {
		t.Errorf("P90 TTFT in the +Inf bucket: %v %s, want hi +Inf and a fail (lo 10 > 5.3)", p.Value, p.Verdict)
	}
	js, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("step JSON: %s", js)
	var back Step
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, back) {
		t.Errorf("JSON round trip changed the step:\n%s\n%+v", js, back)
	}
	o := DefaultOptions()
	o.Seed = 99
	c := Judge(bar, ws, load(12, 100, 100), o)
	pa, _ := a.Part(PartErrors)
	pc, _ := c.Part(PartErrors)
	if pa.Value.Center != pc.Value.Center {
		t.Errorf("the seed changed the error rate's center: %g vs %g", pa.Value.Center, pc.Value.Center)
	}
}

func TestWorse(t *testing.T) {
	cases := []struct {
		a, b, want Verdict // documented order: fail > no_data > too_close > pass
	}{
		{Pass, TooClose, TooClose},
		{TooClose, NoData, NoData},
		{NoData, Fail, Fail},
		{Fail, Pass, Fail},
		{Pass, "bogus", "bogus"}, // an unknown verdict never passes
	}
	for _, c := range cases {
		if got := Worse(c.a, c.b); got != c.want {
			t.Errorf("Worse(%s, %s) = %s, want %s", c.a, c.b, got, c.want)
		}
	}
}

// BenchmarkJudge judges a 20-window step with 2000 resamples per part.
func BenchmarkJudge(b *testing.B) {
	ws := spec{ttft: closeTTFT, tpot: fastTPOT, e5xx: 1}.windows(20)
	ls := load(20, 100, 100)
	for b.Loop() {
		Judge(bar, ws, ls, DefaultOptions())
	}
}

// TestOpenBucketEdgeAtTheBar covers a bar that sits on a bucket edge, as the
// reference bar of 10 tokens/s sits on vLLM's 0.1 s per-token edge: when the
// whole interval lies in the bucket just past the bar, the quantile is
// strictly past it (buckets are (a, b]), so the part fails rather than
// reading too close.
func TestOpenBucketEdgeAtTheBar(t *testing.T) {
	const n = 20
	justSlow := []float64{0, 0, 0, 0, 0, 100} // every TPOT in (0.1, 0.15]: under 10 tok/s
	st := Judge(bar, spec{ttft: fastTTFT, tpot: justSlow}.windows(n), load(n, 100, 100), DefaultOptions())
	p, _ := st.Part(PartInteractivity)
	if p.Verdict != Fail {
		t.Errorf("P90 TPOT wholly in (0.1, 0.15] against a 10 tok/s bar: %s (interval %g-%g), want fail", p.Verdict, p.Value.Lo, p.Value.Hi)
	}
	justFast := []float64{0, 0, 0, 0, 100} // every TPOT in (0.075, 0.1]: at least 10 tok/s
	st = Judge(bar, spec{ttft: fastTTFT, tpot: justFast}.windows(n), load(n, 100, 100), DefaultOptions())
	if p, _ = st.Part(PartInteractivity); p.Verdict != Pass {
		t.Errorf("P90 TPOT wholly in (0.075, 0.1] against a 10 tok/s bar: %s, want pass", p.Verdict)
	}
	// The same for TTFT with a bar on the 5 s edge.
	edgeBar := bar
	edgeBar.TTFTP90 = 5
	justLate := []float64{0, 0, 0, 0, 0, 0, 100} // all in (5, 6]
	st = Judge(edgeBar, spec{ttft: justLate, tpot: fastTPOT}.windows(n), load(n, 100, 100), DefaultOptions())
	if p, _ = st.Part(PartTTFT); p.Verdict != Fail {
		t.Errorf("P90 TTFT wholly in (5, 6] against a 5 s bar: %s, want fail", p.Verdict)
	}
}

// TestStallNeverPasses: requests run and no token comes for some windows.
// Their first tokens land after the step, so the latency histograms hold only
// the fast turns from before the stall; the step must not pass on them.
func TestStallNeverPasses(t *testing.T) {
	const n = 10
	ws := spec{ttft: fastTTFT, tpot: fastTPOT}.windows(n)
	for i := range ws {
		ws[i].Gauge = map[string]signal.GaugeStat{signal.Running: {Mean: 4, Max: 4, Last: 4, N: 3}}
		ws[i].Counter[signal.GenerationTokens] = 500
	}
	if st := Judge(bar, ws, load(n, 100, 100), DefaultOptions()); st.Verdict != Pass {
		t.Fatalf("setup: a healthy step reads %s", st.Verdict)
	}
	for i := 6; i < n; i++ {
		ws[i].Counter[signal.GenerationTokens] = 0
		ws[i].Hist[signal.TTFT] = hist(ttftBounds, nil)
	}
	st := Judge(bar, ws, load(n, 100, 100), DefaultOptions())
	if st.Verdict == Pass || st.Parts[0].Verdict != NoData || st.Parts[1].Verdict != NoData {
		t.Errorf("a step with 4 stalled windows: %s (ttft %s, interactivity %s), want latency no_data", st.Verdict, st.Parts[0].Verdict, st.Parts[1].Verdict)
	}
	if !strings.Contains(strings.Join(st.Warnings, " "), "a stall") {
		t.Errorf("no stall warning: %v", st.Warnings)
	}
}

// TestClientErrorsWhenTheServerReportsNoStatuses: SGLang alone exposes no
// HTTP status counters. By default errors read no data; with ClientErrors on,
// the client's count is used and the source says so.
func TestClientErrorsWhenTheServerReportsNoStatuses(t *testing.T) {
	const n = 10
	ws := spec{ttft: fastTTFT, tpot: fastTPOT}.windows(n)
	ls := load(n, 100, 100)
	for i := range ws {
		delete(ws[i].Counter, signal.HTTP4xx)
		delete(ws[i].Counter, signal.HTTP5xx)
		ls[i].ClientErrors = 5 // 5% refused, as the client saw
	}
	if p, _ := Judge(bar, ws, ls, DefaultOptions()).Part(PartErrors); p.Verdict != NoData {
		t.Errorf("default: errors %s, want no_data", p.Verdict)
	}
	o := DefaultOptions()
	o.ClientErrors = true
	p, _ := Judge(bar, ws, ls, o).Part(PartErrors)
	if p.Verdict != Fail || !strings.Contains(p.Source, "client-seen") || p.Value.Center != 0.05 {
		t.Errorf("client errors: %s at %g from %q, want fail at 0.05 from the client's count", p.Verdict, p.Value.Center, p.Source)
	}
	// one warning says why, not one per absent status counter beside it
	// (the default run's grouped warnings showed three lines for one fact)
	if len(p.Value.Warnings) != 1 || !strings.Contains(p.Value.Warnings[0], "no HTTP status counters") {
		t.Errorf("client errors: warnings %q, want the one line that says the client counts", p.Value.Warnings)
	}
}
