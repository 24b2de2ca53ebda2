package verdict

import (
	"math"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
)

// errorStep judges a step whose windows plan the given turns, with the
// client-side errors (turns not reached) and server 5xx given per window.
func errorStep(planned, notReached, e5xx []int) Part {
	ws := spec{ttft: fastTTFT, tpot: fastTPOT}.windows(len(planned))
	ls := make([]LoadWindow, len(planned))
	for i := range ls {
		ls[i] = LoadWindow{Planned: planned[i], Sent: planned[i] - notReached[i], NotReached: notReached[i]}
		ws[i].Counter[signal.HTTP5xx] = float64(e5xx[i])
	}
	p, _ := Judge(bar, ws, ls, DefaultOptions()).Part(PartErrors)
	return p
}

func repeat(n, v int) []int {
	xs := make([]int, n)
	for i := range xs {
		xs[i] = v
	}
	return xs
}

// TestErrorIntervalNeverNarrowerThanWilson: the error interval covers the
// binomial (Wilson) interval of k errors in n turns, as a latency interval
// covers its bucket, and its verdict follows the wider interval. The bar is 2%.
func TestErrorIntervalNeverNarrowerThanWilson(t *testing.T) {
	cases := []struct {
		name                  string // what the step shows
		planned, unsent, e5xx []int
		want                  Verdict
	}{
		// The case: 0 errors in 32 turns is 0-10.7% by Wilson: too close, not a pass on [0, 0].
		{"0 errors in 32 turns", repeat(4, 8), repeat(4, 0), repeat(4, 0), TooClose},
		// 0 errors in 150 turns: Wilson's upper bound is ~2.5%, above the 2% bar: too close.
		{"0 errors in 150 turns", repeat(10, 15), repeat(10, 0), repeat(10, 0), TooClose},
		// 0 errors in 2000 turns: Wilson reaches 0.19%, well below the bar: a pass.
		{"0 errors in 2000 turns", repeat(20, 100), repeat(20, 0), repeat(20, 0), Pass},
		// 1 error per window in 20 windows of 100: 1% with a Wilson hi of ~1.5%: a pass.
		{"1% in 2000 turns", repeat(20, 100), repeat(20, 0), repeat(20, 1), Pass},
		// 3 windows of 10 turns, no errors (was "few turns", a pass with a warning): too close.
		{"0 errors in 30 turns", repeat(3, 10), repeat(3, 0), repeat(3, 0), TooClose},
		// Every turn failed in every window: Wilson's lower bound ~89% > 2%: fail.
		{"all failed in 32 turns", repeat(4, 8), repeat(4, 8), repeat(4, 0), Fail},
	}
	for _, c := range cases {
		p := errorStep(c.planned, c.unsent, c.e5xx)
		k, n := 0, 0
		for i := range c.planned {
			k += c.unsent[i] + c.e5xx[i]
			n += c.planned[i]
		}
		wlo, whi := stats.Wilson(k, n, 0.95)
		if p.Verdict != c.want || p.Value.Lo > wlo+1e-12 || p.Value.Hi < whi-1e-12 {
			t.Errorf("%s: %s on %.4f (%.4f-%.4f), want %s on an interval covering Wilson's %.4f-%.4f", c.name, p.Verdict, p.Value.Center, p.Value.Lo, p.Value.Hi, c.want, wlo, whi)
		}
	}
}

// TestErrorRateNeverAbove100: numerator and denominator come from the same
// windows; a window whose errors exceed its planned turns is a counting bug
// upstream: it is clamped to its planned turns and a warning says so.
func TestErrorRateNeverAbove100(t *testing.T) {
	cases := []struct {
		name           string // what the windows hold
		planned, e5xx  []int
		center, lo, hi float64 // wanted bounds: the center exactly, lo at most, hi at most
	}{
		// One window counts 30 server errors for 10 planned turns: read as 10 of 10.
		{"one window over", []int{10, 10, 10, 10}, []int{30, 0, 0, 0}, 0.25, 1, 1},
		// Every window over: 100%, never 150%.
		{"every window over", []int{10, 10, 10, 10}, []int{15, 15, 15, 15}, 1, 1, 1},
		// Errors in a window that planned nothing: clamped to zero there.
		{"errors with nothing planned", []int{10, 10, 10, 0}, []int{0, 0, 0, 5}, 0, 1, 1},
	}
	for _, c := range cases {
		p := errorStep(c.planned, repeat(len(c.planned), 0), c.e5xx)
		v := p.Value
		if math.Abs(v.Center-c.center) > 1e-12 || v.Lo > c.lo || v.Hi > c.hi || v.Lo < 0 || v.Lo > v.Center || v.Hi < v.Center {
			t.Errorf("%s: %.4f (%.4f-%.4f), want %.4f inside [0, 1]", c.name, v.Center, v.Lo, v.Hi, c.center)
		}
		if !strings.Contains(strings.Join(v.Warnings, " "), "counting bug") {
			t.Errorf("%s: no warning names the counting bug: %q", c.name, v.Warnings)
		}
	}
}

// TestErrorIntervalWeighsWindowsByTurns: the 35.9% (0.0-59.2). The
// interval is a ratio over turns (resampled windows, sum of errors over sum
// of planned turns), so where the unsent turns are stamped decides it:
// stamped where the lane would have sent them, the step fails; all stamped
// in the failure's window, one of five windows holds every error and 3 in 10
// resamples leave it out, so the low bound is 0 and the step reads too close,
// with a warning that the interval rests on few effective windows.
func TestErrorIntervalWeighsWindowsByTurns(t *testing.T) {
	// 39 turns, 14 errors (35.9%): one lane's turns after its failure
	// spread over the windows it would have sent them in.
	spread := errorStep([]int{8, 8, 8, 8, 7}, []int{0, 4, 4, 3, 3}, repeat(5, 0))
	if spread.Verdict != Fail || spread.Value.Lo < 0.05 {
		t.Errorf("errors spread over the windows: %s on %.3f (%.3f-%.3f), want a fail", spread.Verdict, spread.Value.Center, spread.Value.Lo, spread.Value.Hi)
	}
	// The same 14 of 39, all stamped at the failure.
	stamped := errorStep([]int{8, 20, 4, 4, 3}, []int{0, 14, 0, 0, 0}, repeat(5, 0))
	if math.Abs(stamped.Value.Center-14.0/39) > 1e-12 || stamped.Verdict != TooClose {
		t.Errorf("errors stamped in one window: %s on %.3f (%.3f-%.3f), want too close at %.3f", stamped.Verdict, stamped.Value.Center, stamped.Value.Lo, stamped.Value.Hi, 14.0/39)
	}
	t.Logf("spread: %s on %.1f%% (%.1f-%.1f); stamped: %s on %.1f%% (%.1f-%.1f)", spread.Verdict, 100*spread.Value.Center, 100*spread.Value.Lo, 100*spread.Value.Hi, stamped.Verdict, 100*stamped.Value.Center, 100*stamped.Value.Lo, 100*stamped.Value.Hi)
	if !strings.Contains(strings.Join(stamped.Value.Warnings, " "), "effective windows") {
		t.Errorf("errors stamped in one window: no warning about the windows' weights: %q", stamped.Value.Warnings)
	}
}

// TestGatewayErrorsWithoutAnAbortCounter: Modelplane's and OpenTelemetry's
// gen_ai names count failed requests (error_type) but have no aborted
// counter; errors read no data all run when requests_aborted was required.
// A failed request is an error; a window with neither counter is no data.
func TestGatewayErrorsWithoutAnAbortCounter(t *testing.T) {
	ws := spec{ttft: fastTTFT, tpot: fastTPOT}.windows(20)
	ls := make([]LoadWindow, len(ws))
	for i := range ws {
		delete(ws[i].Counter, signal.RequestsAborted)
		ws[i].Counter[signal.RequestsFailed] = 1 // one _OTHER failure per window
		ls[i] = LoadWindow{Planned: 100, Sent: 100}
	}
	p, _ := Judge(bar, ws, ls, DefaultOptions()).Part(PartErrors)
	if p.Verdict == NoData || math.Abs(p.Value.Center-0.01) > 1e-9 {
		t.Errorf("gateway errors: %s at %g, want judged at 1%% (20 failed of 2000)", p.Verdict, p.Value.Center)
	}
	for i := range ws {
		delete(ws[i].Counter, signal.RequestsFailed)
	}
	if p, _ := Judge(bar, ws, ls, DefaultOptions()).Part(PartErrors); p.Verdict != NoData {
		t.Errorf("neither aborted nor failed counted: %s, want no data", p.Verdict)
	}
}
