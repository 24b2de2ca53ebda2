package sweep

import (
	"math"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// step builds a judged step from TTFT and interactivity (center, lo, hi)
// under the reference bar (5.3 s, 10 tok/s, 2%), with errors at zero.
func step(n int, ttft, inter [3]float64) Point {
	bar := verdict.Bar{TTFTP90: 5.3, InteractivityP90: 10, ErrorRate: 0.02}
	mk := func(name string, v [3]float64, b float64, ok func(lo, hi float64) verdict.Verdict) verdict.Part {
		return verdict.Part{Name: name, Value: stats.Summary{Center: v[0], Lo: v[1], Hi: v[2]}, Bar: b, Verdict: ok(v[1], v[2])}
	}
	t := mk("ttft", ttft, bar.TTFTP90, func(lo, hi float64) verdict.Verdict {
		switch {
		case hi <= bar.TTFTP90:
			return verdict.Pass
		case lo > bar.TTFTP90:
			return verdict.Fail
		}
		return verdict.TooClose
	})
	i := mk("interactivity", inter, bar.InteractivityP90, func(lo, hi float64) verdict.Verdict {
		switch {
		case lo >= bar.InteractivityP90:
			return verdict.Pass
		case hi < bar.InteractivityP90:
			return verdict.Fail
		}
		return verdict.TooClose
	})
	e := verdict.Part{Name: "errors", Value: stats.Summary{}, Bar: bar.ErrorRate, Verdict: verdict.Pass}
	v := verdict.Worse(verdict.Worse(t.Verdict, i.Verdict), e.Verdict)
	return Point{Sessions: n, Judged: verdict.Step{Verdict: v, Parts: []verdict.Part{t, i, e}}}
}

// logCross is where the log of a value, linear between two steps, meets the
// bar: the crossing the fit finds when the two steps are in order.
func logCross(x0, x1, v0, v1, bar float64) float64 {
	return x0 + math.Log(bar/v0)/math.Log(v1/v0)*(x1-x0)
}

func TestCapacityOf(t *testing.T) {
	fast := [3]float64{20, 18, 22}
	cases := []struct {
		name           string
		points         []Point
		want, lo, hi   float64 // lo and hi: the bounds the interval must lie within
		limitedBy      string
		atLeast, below bool
		bracket        [2]int
	}{
		// TTFT crosses 5.3 between 4.3 at 6 and 6.3 at 8, in the log of
		// the value; the interval, from resampling every step within its
		// own interval, lies between the two steps.
		{"interpolated ttft crossing", []Point{
			step(4, [3]float64{2, 1.5, 2.5}, fast),
			step(6, [3]float64{4.3, 3.8, 4.8}, fast),
			step(8, [3]float64{6.3, 5.8, 6.8}, fast),
		}, logCross(6, 8, 4.3, 6.3, 5.3), 6, 8, "ttft", false, false, [2]int{6, 8}},
		// Interactivity limits before TTFT does: 12 -> 8 tok/s crosses 10 near 5.
		{"interactivity limits", []Point{
			step(4, [3]float64{1, 0.5, 1.5}, [3]float64{12, 11, 13}),
			step(6, [3]float64{1.5, 1, 2}, [3]float64{8, 7, 9}),
		}, logCross(4, 6, 12, 8, 10), 4, 6, "interactivity", false, false, [2]int{4, 6}},
		// Every step passed: capacity is at least the last step, nothing extrapolated.
		{"all pass", []Point{
			step(4, [3]float64{1, 0.5, 1.5}, fast),
			step(8, [3]float64{2, 1.5, 2.5}, fast),
		}, 8, 8, 8, "not reached", true, false, [2]int{8, 0}},
		// The first step already misses: below the first step, an interval
		// from 0 to the first step, never a zero-width 0-0.
		{"below first", []Point{
			step(4, [3]float64{9, 8, 10}, fast),
		}, 0, 0, 4, "ttft", false, true, [2]int{0, 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CapacityOf(c.points)
			if !near(got.Sessions, c.want) || got.Lo < c.lo || got.Hi > c.hi {
				t.Errorf("capacity = %g (%g-%g), want %g within %g-%g", got.Sessions, got.Lo, got.Hi, c.want, c.lo, c.hi)
			}
			if !c.atLeast && !(got.Lo < got.Hi) {
				t.Errorf("interval %g-%g has no width, though no step pins the value", got.Lo, got.Hi)
			}
			if got.LimitedBy != c.limitedBy || got.AtLeast != c.atLeast || got.BelowFirst != c.below {
				t.Errorf("limited by %q at_least %v below %v, want %q %v %v", got.LimitedBy, got.AtLeast, got.BelowFirst, c.limitedBy, c.atLeast, c.below)
			}
			if got.Lo > got.Sessions || got.Sessions > got.Hi {
				t.Errorf("interval %g-%g does not hold the capacity %g", got.Lo, got.Hi, got.Sessions)
			}
			if got.Bracket != c.bracket {
				t.Errorf("bracket %v, want %v", got.Bracket, c.bracket)
			}
		})
	}
}

func TestCapacityMissingSignalNeverPasses(t *testing.T) {
	p1 := step(4, [3]float64{1, 0.5, 1.5}, [3]float64{20, 18, 22})
	p2 := step(8, [3]float64{1, 0.5, 1.5}, [3]float64{20, 18, 22})
	// at 8 sessions TTFT is missing: the curve ends at 4, no interpolation into the unknown
	p2.Judged.Parts[0].Verdict = verdict.NoData
	p2.Judged.Parts[0].Value = stats.Summary{Center: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	p2.Judged.Verdict = verdict.NoData
	got := CapacityOf([]Point{p1, p2})
	if got.Sessions != 4 || got.AtLeast {
		t.Errorf("capacity with a missing signal at 8 = %+v, want 4 and not at_least", got)
	}
}

func TestTargetVerdict(t *testing.T) {
	cases := []struct {
		c    Capacity
		want verdict.Verdict
	}{
		{Capacity{Sessions: 19, Lo: 18.2, Hi: 20}, verdict.Pass},                              // interval above the target
		{Capacity{Sessions: 14, Lo: 13.7, Hi: 15}, verdict.TooClose},                          // touches the target: too close, as in the reference's recipe 3
		{Capacity{Sessions: 10, Lo: 9, Hi: 11}, verdict.Fail},                                 // clear miss
		{Capacity{Sessions: 10, Lo: 10, Hi: 10, AtLeast: true, HiOpen: true}, verdict.NoData}, // ladder ended below the target
	}
	for _, c := range cases {
		if got := c.c.Target(15).Verdict; got != c.want {
			t.Errorf("target 15 with capacity %g (%g-%g): %s, want %s", c.c.Sessions, c.c.Lo, c.c.Hi, got, c.want)
		}
	}
}

func TestCostOf(t *testing.T) {
	// The reference report: 2 nodes x 8 GPUs at $1.80 = $28.80/hour; 10 sessions -> $2.88.
	// 46M tokens an hour: 30M cached input, 15M uncached, 1M output over a 10-minute step.
	c := CostOf(2, 8, 1.80, Capacity{Sessions: 10, Lo: 8, Hi: 12}, Tokens{Prompt: 45e6 / 6, Cached: 30e6 / 6, Output: 1e6 / 6, Seconds: 600, PerHour: 46e6}, 10)
	if !near(c.USDPerHour, 28.8) || !near(*c.USDPerSessionHour, 2.88) {
		t.Errorf("cost = %+v, want $28.80/hour and $2.88/session-hour", c)
	}
	if !near(*c.USDPerSessionHourLo, 2.4) || !near(*c.USDPerSessionHourHi, 3.6) {
		t.Errorf("cost interval = %g-%g, want 2.40-3.60", *c.USDPerSessionHourLo, *c.USDPerSessionHourHi)
	}
	if !near(*c.USDPerMillionTokens, 28.8/46) {
		t.Errorf("$/M tokens = %g, want %g", *c.USDPerMillionTokens, 28.8/46)
	}
	if !near(c.CachedInputPerHour, 30e6) || !near(c.UncachedInputPerHour, 15e6) || !near(c.OutputPerHour, 1e6) {
		t.Errorf("token split = %g cached, %g uncached, %g output per hour", c.CachedInputPerHour, c.UncachedInputPerHour, c.OutputPerHour)
	}
	if below := CostOf(2, 8, 1.8, Capacity{BelowFirst: true}, Tokens{}, 0); below.USDPerSessionHour != nil || below.USDPerMillionTokens != nil {
		t.Errorf("a recipe below its first step got a price: %+v", below)
	}
}

// TestCostOfUnpriced: a recipe with no GPUs stated, or no price per
// GPU-hour, gets no dollar figure ($0.00 per session-hour would rank it the
// cheapest of all), but keeps its tokens per hour.
func TestCostOfUnpriced(t *testing.T) {
	tokens := Tokens{Prompt: 45e6 / 6, Cached: 30e6 / 6, Output: 1e6 / 6, Seconds: 600, PerHour: 46e6}
	for _, c := range []Cost{
		CostOf(0, 0, 0, Capacity{Sessions: 10, Lo: 8, Hi: 12}, tokens, 10),
		CostOf(2, 8, 0, Capacity{Sessions: 10, Lo: 8, Hi: 12}, tokens, 10),
		CostOf(0, 0, 0, Capacity{NotEstablished: true, Hi: 4}, tokens, 0),
	} {
		if c.USDPerHour != 0 || c.USDPerSessionHour != nil || c.USDPerSessionHourLo != nil || c.USDPerSessionHourHi != nil ||
			c.USDPerSessionHourAtLeast != nil || c.USDPerMillionTokens != nil {
			t.Errorf("an unpriced recipe got a price: %+v", c)
		}
		if !near(c.TokensPerHour, 46e6) {
			t.Errorf("tokens per hour %g, want 46e6 priced or not", c.TokensPerHour)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestCapacityOpenUpperBound: when the optimistic curve never leaves the bar
// within the ladder, the upper bound is the last step and says it is open.
func TestCapacityOpenUpperBound(t *testing.T) {
	got := CapacityOf([]Point{
		step(4, [3]float64{2, 1, 5.0}, [3]float64{20, 18, 22}),
		step(8, [3]float64{5.0, 4, 6}, [3]float64{20, 18, 22}), // too close: hi crosses, center and lo do not
	})
	if got.Sessions != 8 || !got.HiOpen || got.Hi != 8 || got.AtLeast {
		t.Errorf("capacity = %+v, want 8 with an open upper bound at 8 and not at_least", got)
	}
	if got.Lo >= 8 || got.Lo <= 4 {
		t.Errorf("lo = %g, want the pessimistic crossing between 4 and 8", got.Lo)
	}
}

// TestCapacityFailOnBucketEdge: interactivity whose upper bound rests on the
// bar at an open bucket edge reads fail at 12; every curve must end there.
func TestCapacityFailOnBucketEdge(t *testing.T) {
	p12 := step(12, [3]float64{3, 2, 5}, [3]float64{7.2, 6.7, 10})
	for i := range p12.Judged.Parts {
		if p12.Judged.Parts[i].Name == "interactivity" {
			p12.Judged.Parts[i].Verdict = verdict.Fail
		}
	}
	p12.Judged.Verdict = verdict.Fail
	got := CapacityOf([]Point{step(10, [3]float64{1, 0.7, 1.8}, [3]float64{10.7, 10, 13.3}), p12})
	if got.HiOpen || got.Hi > 12 || got.Hi <= got.Sessions || got.LimitedBy != "interactivity" {
		t.Errorf("capacity = %+v, want a closed upper bound at or below 12 limited by interactivity", got)
	}
}

// TestCapacityIsTheMostSessionsHeld: a low step whose centre touched the bar
// (a handful of cold prompts) does not end capacity: the capacity is where
// the recipe leaves the bar, above the steps that held. Read from every
// step at once, the noisy low step is pooled with the confident steps above
// it (more sessions never lower TTFT), so it no longer drags the lower
// bound to 0 as the crossing of its own pessimistic bound did.
func TestCapacityIsTheMostSessionsHeld(t *testing.T) {
	fast := [3]float64{20, 18, 22}
	got := CapacityOf([]Point{
		step(2, [3]float64{5.4, 2.6, 7.5}, fast), // too close: centre just over 5.3
		step(6, [3]float64{2.7, 2.2, 5.0}, fast),
		step(10, [3]float64{1.7, 1.0, 2.5}, [3]float64{13.6, 13.3, 20}),
		step(12, [3]float64{4.9, 2.5, 5.2}, [3]float64{7.1, 6.7, 9.9}), // interactivity fails
	})
	if got.LimitedBy != "interactivity" || got.Sessions <= 10 || got.Sessions >= 12 || got.BelowFirst {
		t.Errorf("capacity %s: want between 10 and 12, limited by interactivity", got)
	}
	// the upper bound is the step that missed: where in the gap a part
	// that jumps crosses, no step shows
	if got.Lo <= 10 || got.Hi != 12 {
		t.Errorf("interval %g-%g: want it from above the 10 sessions that held with confidence up to the 12 that failed", got.Lo, got.Hi)
	}
}

// withPart sets (or adds) a part of a judged step and makes the step's
// verdict the worst of its parts again.
func withPart(p Point, part verdict.Part) Point {
	parts := append([]verdict.Part(nil), p.Judged.Parts...)
	found := false
	for i := range parts {
		if parts[i].Name == part.Name {
			parts[i], found = part, true
		}
	}
	if !found {
		parts = append(parts, part)
	}
	p.Judged.Parts, p.Judged.Verdict, p.Judged.Missing = parts, verdict.Pass, nil
	for _, q := range parts {
		p.Judged.Verdict = verdict.Worse(p.Judged.Verdict, q.Verdict)
		p.Judged.Missing = append(p.Judged.Missing, q.Missing...)
	}
	return p
}

// noData is a part that could not be measured; missing lists the signals.
func noData(name string, missing ...string) verdict.Part {
	nan := math.NaN()
	return verdict.Part{Name: name, Verdict: verdict.NoData, Value: stats.Summary{Center: nan, Lo: nan, Hi: nan}, Missing: missing}
}

// errorsAt is an error part at rate (lo-hi) against the 2% bar.
func errorsAt(v verdict.Verdict, rate, lo, hi float64) verdict.Part {
	return verdict.Part{Name: "errors", Verdict: v, Bar: 0.02, Value: stats.Summary{Center: rate, Lo: lo, Hi: hi}}
}

// toolCalls is the tool-call part under load (a share of mismatched calls
// against a 2% bar, Clopper-Pearson interval), with its own verdict.
func toolCalls(v verdict.Verdict, share, lo, hi float64) verdict.Part {
	return verdict.Part{Name: "tool_calls", Verdict: v, Bar: 0.02, Value: stats.Summary{Center: share, Lo: lo, Hi: hi}}
}

// TestCapacityEveryPartCounts: every bar part takes part in capacity,
// limited_by and the target, tool calls included, and limited_by names the
// part that actually missed, or "no data: <signals>" when nothing missed and
// a measurement was lacking.
func TestCapacityEveryPartCounts(t *testing.T) {
	fast := [3]float64{20, 18, 22}
	ok := func(n int) Point { return step(n, [3]float64{1, 0.5, 1.5}, fast) }
	closeAt := func(n int) Point { return step(n, [3]float64{4.5, 3.5, 5.5}, fast) } // ttft too close
	lowSent := func(n int) Point {
		// errors end the step: 10% failed, so too few turns went out and
		// latency reads no data without any signal missing
		p := withPart(ok(n), noData("ttft"))
		p = withPart(p, noData("interactivity"))
		return withPart(p, errorsAt(verdict.Fail, 0.10, 0.08, 0.12))
	}
	cases := []struct {
		name         string // what the sweep shows
		points       []Point
		want, lo, hi float64
		hiOpen       bool
		limitedBy    string
		target       verdict.Verdict // at 15 sessions
	}{
		// The case: tool calls fail at 12, TTFT was too close at 8. It
		// read "no step failed" with an open bound at 12 and a too-close
		// target; now the tool-call fail ends capacity at 8, below 12.
		// TTFT, too close at 8 but confident at 12, is pinned below the bar
		// at 8 too (more sessions never lower TTFT): the bound is 8.
		{"tool calls fail", []Point{
			withPart(ok(4), toolCalls(verdict.Pass, 0, 0, 0.1)),
			withPart(closeAt(8), toolCalls(verdict.Pass, 0, 0, 0.1)),
			withPart(ok(12), toolCalls(verdict.Fail, 0.2, 0.1, 0.3)),
		}, 8, 8, 12, false, "tool_calls", verdict.Fail},
		// Tool calls fail at the only step: below the first step, by tool
		// calls, somewhere under its 4 sessions.
		{"tool calls fail at the first step", []Point{
			withPart(ok(4), toolCalls(verdict.Fail, 0.2, 0.1, 0.3)),
		}, 0, 0, 4, false, "tool_calls", verdict.Fail},
		// An inconclusive tool-call pass (interval past the bar) does not end
		// capacity: evals block only on a confident fail.
		{"tool calls inconclusive", []Point{
			withPart(ok(4), toolCalls(verdict.Pass, 0, 0, 0.3)), withPart(ok(8), toolCalls(verdict.Pass, 0.03, 0, 0.2)),
		}, 8, 8, 8, true, "not reached", verdict.NoData},
		// Errors end the sweep at 8 and latency is no data there: limited by
		// errors, not by the TTFT whose curve ended for lack of data; the
		// errors' optimistic draws (0 -> 8%, the interval's low end at 8)
		// cross 2% near 5, but where in the gap the rate jumped no step
		// shows: the bound is the step that missed, closed.
		{"errors end the sweep", []Point{ok(4), lowSent(8)}, 4, 4, 8, false, "errors", verdict.Fail},
		// TTFT is missing at 8 and nothing else missed: no data, naming the
		// signal; nothing was measured above 4, so the bound is open and a
		// target above it is no data, never a fail.
		{"ttft missing", []Point{ok(4), withPart(ok(8), noData("ttft", "ttft_seconds"))}, 4, 4, 4, true, "no data: ttft_seconds", verdict.NoData},
		// A stall at 8: both latency parts no data, no signal missing: the parts are named.
		{"latency no data", []Point{ok(4), withPart(withPart(ok(8), noData("ttft")), noData("interactivity"))}, 4, 4, 4, true, "no data: ttft, interactivity", verdict.NoData},
		// The error counters are missing from the first step on: no data, not "below the first step".
		{"no data from the first step", []Point{withPart(ok(4), noData("errors", "http_5xx"))}, 0, 0, 0, true, "no data: http_5xx", verdict.NoData},
		// Interactivity fails at 8 as TTFT goes missing there: the fail is
		// what missed; its optimistic draws (20 -> 6 tok/s, in the log)
		// cross 10 near 6.3, and the bound is the 8 that missed.
		{"a fail beside no data", []Point{ok(4), withPart(step(8, [3]float64{1, 0.5, 1.5}, [3]float64{5, 4, 6}), noData("ttft", "ttft_seconds"))}, 4, 4, 8, false, "interactivity", verdict.Fail},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CapacityOf(c.points)
			// the upper bound is a percentile of resampled crossings: within
			// a tenth of a session of the bound the steps' intervals imply
			if !near(got.Sessions, c.want) || !near(got.Lo, c.lo) || math.Abs(got.Hi-c.hi) > 0.1 || got.HiOpen != c.hiOpen {
				t.Errorf("capacity = %g (%g-%g, hi open %v), want %g (%g-%g, hi open %v): %s", got.Sessions, got.Lo, got.Hi, got.HiOpen, c.want, c.lo, c.hi, c.hiOpen, got.Note)
			}
			if got.LimitedBy != c.limitedBy {
				t.Errorf("limited by %q, want %q (%s)", got.LimitedBy, c.limitedBy, got)
			}
			if strings.HasPrefix(c.limitedBy, "no data") && got.BelowFirst {
				t.Errorf("no data reads below the first step: %s", got)
			}
			if tv := got.Target(15).Verdict; tv != c.target {
				t.Errorf("target 15: %s, want %s", tv, c.target)
			}
		})
	}
}

// TestCapacityNoDataLine: a sweep whose first step read no data says so in
// its capacity line, naming the signal, rather than "below the first step"
// or "0 sessions".
func TestCapacityNoDataLine(t *testing.T) {
	p := withPart(step(4, [3]float64{1, 0.5, 1.5}, [3]float64{20, 18, 22}), noData("errors", "http_5xx"))
	if got := CapacityOf([]Point{p}).String(); got != "not measured (no data: http_5xx from the first step)" {
		t.Errorf("capacity line %q", got)
	}
}

// TestFewTurnsDoNotPullCapacityToZero: the default demo's shape after the
// Wilson floor. 0 errors in 148 turns at 4 sessions is too close (upper bound
// 2.5% against 2%), 0 in 252 at 8 passes (1.5%), 12 fails on TTFT. The
// 4-session step's verdict stays too close, but 8 sessions held with
// confidence, and errors never fall as sessions rise: the interval's lower
// bound is not 0, and the target 8 passes.
func TestFewTurnsDoNotPullCapacityToZero(t *testing.T) {
	fast := [3]float64{20, 18, 22}
	p4 := withPart(step(4, [3]float64{2.2, 1.0, 3.2}, fast), errorsAt(verdict.TooClose, 0, 0, 0.025))
	p8 := withPart(step(8, [3]float64{1.5, 0.9, 2.5}, [3]float64{13.5, 13.3, 20}), errorsAt(verdict.Pass, 0, 0, 0.015))
	p12 := withPart(step(12, [3]float64{14.9, 7.9, 20}, fast), errorsAt(verdict.TooClose, 0, 0, 0.08))
	got := CapacityOf([]Point{p4, p8, p12})
	if p4.Judged.Verdict != verdict.TooClose {
		t.Fatalf("the 4-session step reads %s, want too close", p4.Judged.Verdict)
	}
	if got.Lo < 8 || got.Sessions <= 8 || got.Sessions >= 12 || got.LimitedBy != "ttft" {
		t.Errorf("capacity %s: want between 8 and 12 with its lower bound at or above 8, limited by ttft", got)
	}
	if tv := got.Target(8).Verdict; tv != verdict.Pass {
		t.Errorf("target 8 reads %s, want pass: 8 sessions held with confidence", tv)
	}
}

// TestCachedTokensNeverPassThePrompt: hits are counted when a request is
// admitted and prompt tokens when it first answers, so over a short step
// hits over prompt tokens read 386%; cached tokens come from the counter
// kept with the prompt tokens, else from the hit share of the lookups.
func TestCachedTokensNeverPassThePrompt(t *testing.T) {
	w := func(c map[string]float64) signal.Window { return signal.Window{Start: 0, End: 30e9, Counter: c} }
	// admitted early, answered late: 3,860 hits for 1,000 prompt tokens
	got := tokensOf([]signal.Window{w(map[string]float64{signal.PromptTokens: 1000, signal.PrefixCacheHits: 3860, signal.PrefixCacheQueries: 4000})})
	if got.Cached > got.Prompt || got.Cached != 965 {
		t.Errorf("cached %g of %g prompt tokens, want 965 (the 96.5%% hit share)", got.Cached, got.Prompt)
	}
	got = tokensOf([]signal.Window{w(map[string]float64{signal.PromptTokens: 1000, signal.PromptTokensCached: 600, signal.PrefixCacheHits: 3860, signal.PrefixCacheQueries: 4000})})
	if got.Cached != 600 {
		t.Errorf("cached %g, want the 600 counted with the prompt tokens", got.Cached)
	}
	if got := tokensOf([]signal.Window{w(map[string]float64{signal.PromptTokens: 1000})}); got.Cached != 0 {
		t.Errorf("no cache counters: cached %g, want 0 (not reported)", got.Cached)
	}
}

// TestIdealCacheIncludesTurnsInFlight: the server counts a lookup when it
// admits a request, so the traces' ideal must count the turns still in
// flight at the window's end too (it left them out), and never refusals.
func TestIdealCacheIncludesTurnsInFlight(t *testing.T) {
	ws := []signal.Window{{Start: 0, End: 30e9}}
	recs := []load.Record{
		{Send: 1, PlannedPromptTokens: 100, IdealCachedTokens: 0, Status: 200, FirstToken: 2, LastToken: 3},
		{Send: 5, PlannedPromptTokens: 100, IdealCachedTokens: 90, Pending: true},                       // in flight at the end
		{Send: 6, PlannedPromptTokens: 100, IdealCachedTokens: 90, Status: 400, Error: load.ErrRefused}, // refused: never looked up
	}
	_, sum := loadWindows(recs, ws)
	if sum.IdealHitRate != 0.45 {
		t.Errorf("ideal hit rate %g, want 0.45 (90 of 200 admitted prompt tokens)", sum.IdealHitRate)
	}
}

// TestFewTurnsAtTheFirstStepOnlyReadAtLeast: a first step too close only
// because its error interval is wide on few turns, then every step above it
// passing with confidence, reads ">= the last step", not "unknown" at 0
// sessions (which made a recipe that held every step look as if it held
// none).
func TestFewTurnsAtTheFirstStepOnlyReadAtLeast(t *testing.T) {
	fast := [3]float64{20, 18, 22}
	p4 := withPart(step(4, [3]float64{2.2, 1.0, 3.2}, fast), errorsAt(verdict.TooClose, 0, 0, 0.025))
	p8 := withPart(step(8, [3]float64{1.5, 0.9, 2.5}, fast), errorsAt(verdict.Pass, 0, 0, 0.015))
	p12 := withPart(step(12, [3]float64{1.9, 1.0, 2.9}, fast), errorsAt(verdict.Pass, 0, 0, 0.012))
	got := CapacityOf([]Point{p4, p8, p12})
	if got.Sessions != 12 || got.Lo != 12 || !got.AtLeast || !got.HiOpen || got.LimitedBy != "not reached" {
		t.Errorf("capacity %s (%+v): want >= 12 sessions, not reached", got, got)
	}
	if !strings.Contains(got.Note, "4 sessions") || !strings.Contains(got.String(), ">= 12") {
		t.Errorf("note %q / line %q: want the too-close step named and >= 12", got.Note, got)
	}
	if tv := got.Target(12).Verdict; tv != verdict.Pass {
		t.Errorf("target 12 reads %s, want pass", tv)
	}
	// a too-close step that the envelope cannot lift (the steps above it
	// are no more certain) still bounds capacity from below
	p8b := withPart(step(8, [3]float64{1.5, 0.9, 2.5}, fast), errorsAt(verdict.TooClose, 0, 0, 0.03))
	p12b := withPart(step(12, [3]float64{1.9, 1.0, 2.9}, fast), errorsAt(verdict.TooClose, 0, 0, 0.028))
	if got := CapacityOf([]Point{p4, p8b, p12b}); got.AtLeast || got.Lo >= 12 {
		t.Errorf("every step too close on errors reads %s (%+v): want the interval to reach below 12", got, got)
	}
}
