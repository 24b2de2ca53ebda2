package sweep

import (
	"sort"

	"github.com/headroom-bench/headroom/internal/verdict"
)

// TargetOf judges n sessions (the target or the stress step). Where the
// sweep ran a step at n that passed or failed, that step's verdict (pooled
// with its repeat) is the target's: it is the step that must pass, and the
// capacity fitted from every step may put its bound a hair either side of
// a step that was measured. A step at n that read too close or no data
// keeps the target from passing unless a step above n passed. Otherwise n
// is judged on the sweep's capacity, with one rule more than the capacity
// interval: a fail needs a step that failed. When no step was judged, or
// the first step that missed the bar read no data, nothing above the last
// step that held was measured, and a target there reads no data, never
// fail.
func TargetOf(steps []StepResult, c Capacity, n int) TargetVerdict {
	pts := Points(steps)
	if len(pts) == 0 {
		return TargetVerdict{Sessions: n, Verdict: verdict.NoData}
	}
	var atN verdict.Verdict // the step at n's verdict, when it neither passed nor failed
	passedAbove := false
	for _, p := range pts {
		v := p.Judged.Verdict
		if p.Sessions == n && (v == verdict.Pass || v == verdict.Fail) {
			return TargetVerdict{Sessions: n, Verdict: v}
		}
		if p.Sessions == n {
			atN = v
		}
		passedAbove = passedAbove || p.Sessions > n && v == verdict.Pass
	}
	t := c.Target(n)
	if t.Verdict == verdict.Pass && atN != "" && !passedAbove {
		// the step at n was measured and did not pass, and no step above
		// it passed: nothing measured says n holds, whatever the fit reads
		t.Verdict = atN
	}
	if t.Verdict != verdict.Fail {
		return t
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].Sessions < pts[j].Sessions })
	for _, p := range pts {
		if p.Judged.Verdict == verdict.Fail && p.Sessions <= n {
			return t // a step at or below the target failed
		}
	}
	for _, p := range pts {
		switch p.Judged.Verdict {
		case verdict.Fail:
			return t // the first miss was a failure (above the target)
		case verdict.NoData:
			t.Verdict = verdict.NoData
			return t
		}
	}
	return t
}
