package sweep

import (
	"sort"

	"github.com/headroom-bench/headroom/internal/verdict"
)

// TargetOf judges n sessions (the target or the stress step). Where the
// sweep ran a step at n that passed or failed, that step's verdict (pooled
// with its repeat) is the target's: it is the step that must pass, and the
// capacity fitted from every step may put its bound a hair either side of
// a step that was measured. Otherwise n is judged on the sweep's capacity,
// with one rule more than the capacity interval: a fail needs a step that
// failed. When no step was judged, or the first step that missed the bar
// read no data, nothing above the last step that held was measured, and a
// target there reads no data, never fail.
func TargetOf(steps []StepResult, c Capacity, n int) TargetVerdict {
	pts := Points(steps)
	if len(pts) == 0 {
		return TargetVerdict{Sessions: n, Verdict: verdict.NoData}
	}
	for _, p := range pts {
		if v := p.Judged.Verdict; p.Sessions == n && (v == verdict.Pass || v == verdict.Fail) {
			return TargetVerdict{Sessions: n, Verdict: v}
		}
	}
	t := c.Target(n)
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
