package sweep

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// A step runs until it is decided: its judged time is at least Plan.Step,
// and goes on, one look at a time, while parts read too close and each could
// still be decided by the step's limit (Plan.MaxStep, and the sweep's GPU
// budget). It ends at the first look at which no part is too close (or one
// fails). Looks are Plan.Step/2 apart (at least one window), not every
// window: each look is one more chance for an interval to miss the truth,
// so a step is looked at a few times, not dozens.

// lookEvery is the judged time between two looks at an extended step: half
// the minimum step, in whole windows, at least one.
func lookEvery(p Plan) time.Duration {
	w := max(p.Window, time.Nanosecond)
	return max(1, (p.Step/2+w-1)/w) * w
}

// decidable names the too-close parts of a provisional judgement when every
// one of them could still clear the bar if the step ran until limit, having
// run elapsed so far; "" when extending would not decide the step (no part
// is too close, one failed, or some too-close part cannot be decided by
// limit, so the step reads too close however long it runs). A part with no
// data yet does not stop the step from going on.
func decidable(st verdict.Step, planned int, elapsed, limit time.Duration, confidence float64) string {
	// the step's verdict may read no data so far (a part with too little
	// yet): what counts is whether its too-close parts can be decided
	if st.Verdict == verdict.Pass || st.Verdict == verdict.Fail || elapsed <= 0 || limit <= elapsed {
		return ""
	}
	grow := float64(limit) / float64(elapsed)
	var can []string
	for _, p := range st.Parts {
		if p.Verdict == verdict.Fail {
			return "" // the step fails whatever more time shows
		}
		if p.Verdict != verdict.TooClose {
			continue
		}
		if !projectedClear(p, planned, grow, confidence) {
			return ""
		}
		can = append(can, p.Name)
	}
	return strings.Join(can, ", ")
}

// projectedClear says whether part p's interval would clear its bar with
// grow times the data. The error part's binomial interval is recomputed at
// its counts scaled up (0 errors in 149 turns cannot clear 2% at 95%, 0 in
// 190 can). A latency interval shrinks by the square root of the data
// towards its center, but never below the histogram bucket holding the
// quantile: a bar inside that bucket is never cleared, however long the step.
// A part at the engine's limit (it preempted or filled its KV cache) is
// never cleared by more time.
func projectedClear(p verdict.Part, planned int, grow, confidence float64) bool {
	if p.AtLimit {
		// the engine preempted or its KV cache filled: more time cannot make it pass, and its
		// interval is inside the bar, so it cannot fail either
		return false
	}
	c, lo, hi, bar := p.Value.Center, p.Value.Lo, p.Value.Hi, p.Bar
	if math.IsNaN(c) || math.IsNaN(lo) || math.IsNaN(hi) || math.IsNaN(bar) {
		return false
	}
	if p.Name == verdict.PartErrors {
		if planned <= 0 {
			return false
		}
		n := int(math.Floor(float64(planned) * grow))
		k := int(math.Round(c * float64(n)))
		wlo, whi := stats.Wilson(k, n, confidence)
		return bar < wlo || bar > whi
	}
	if b := p.Bucket; b[0] < b[1] && bar >= b[0] && bar <= b[1] {
		return false
	}
	f := 1 / math.Sqrt(grow)
	plo, phi := c-(c-lo)*f, c+(hi-c)*f
	return bar < plo || bar > phi
}

// limitOf is the latest a step whose judged time began at measureStart may
// run to: Plan.MaxStep, within the sweep's budget less what the steps after
// it need at their minimum length; no more than the minimum step when
// extension is off.
func (r *Runner) limitOf(measureStart time.Duration) time.Duration {
	p := r.Plan
	limit := measureStart + max(p.MaxStep, p.Step)
	if r.deadline > 0 {
		limit = min(limit, r.deadline-r.reserve)
	}
	// in whole windows past the minimum, so every look is on the grid
	over := max(0, limit-measureStart-p.Step)
	if p.Window > 0 {
		over = over / p.Window * p.Window
	}
	return measureStart + p.Step + over
}

// extendTo looks at step i at t, the current end of its judged time, and
// says until when it goes on: t when it is decided or cannot be by limit,
// a later look when a too-close part could still be decided. why says what
// it waits for.
func (r *Runner) extendTo(i, n int, measureStart, t, limit time.Duration) (next time.Duration, why string) {
	p := r.Plan
	if t >= limit {
		return t, ""
	}
	// the last look falls on the limit itself, which the projection is for
	next = min(t+lookEvery(p), limit)
	st := StepResult{Index: i, Sessions: n, MeasureStart: measureStart.Seconds(), End: t.Seconds()}
	st = JudgeStep(p, st, r.Samples(), r.Book.Step(i, load.PhaseMeasure))
	parts := decidable(st.Judged, st.Load.Planned, t-measureStart, limit-measureStart, p.Options.Confidence)
	if parts == "" {
		return t, ""
	}
	return next, fmt.Sprintf("%s too close after %s (%d turns); could be decided by %s", parts, fmtDur(t-measureStart), st.Load.Planned, fmtDur(limit-measureStart))
}
