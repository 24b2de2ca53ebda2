package rig

import (
	"fmt"
	"sort"
	"strings"

	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// targetOf judges n sessions (the target or the stress step) on the
// sweep's capacity, with one rule more than the capacity interval: a fail
// needs a step that failed. When no step was judged, or the first step that
// missed the bar read no data, nothing above the last step that held was
// measured, and a target there reads no data, never fail.
func targetOf(res sweep.Result, n int) sweep.TargetVerdict {
	pts := sweep.Points(res.Steps)
	if len(pts) == 0 {
		return sweep.TargetVerdict{Sessions: n, Verdict: verdict.NoData}
	}
	t := res.Capacity.Target(n)
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

// unswept is the summary of a run that ended before the sweep (rollout,
// pre-flight or mini evals failed): it measured no capacity and judges no
// target.
func (r *run) unswept(why string, cal *prompt.Calibration) report.Summary {
	sum := r.summary(sweep.Result{StopReason: why}, cal)
	sum.Target, sum.Stress = nil, nil
	return sum
}

// postFlightError says why a run whose post-flight found the engine still
// busy is not over; nil when the engine was idle, or when the server
// reports no running/waiting gauges to tell (pre-flight said so already).
func postFlightError(pf sweep.PostFlight) error {
	if pf.Idle || (!pf.Verified && strings.Contains(pf.Detail, "no running/waiting gauges")) {
		return nil
	}
	detail := pf.Detail
	if !pf.Verified && detail != "" {
		// it could not look: say so, and do not send anyone hunting for
		// requests nobody saw
		return fmt.Errorf("post-flight could not check that the engine is idle: %s; check the engine by hand before the next run", detail)
	}
	if detail == "" {
		detail = fmt.Sprintf("%g running, %g waiting", pf.Running, pf.Waiting)
	}
	return fmt.Errorf("the engine is not back where it started (%s): the run is not over until it is idle; find what is still running (requests the engine kept after the client let go), and run again once it is idle", detail)
}
