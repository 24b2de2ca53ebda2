package rig

import (
	"fmt"
	"strings"

	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sweep"
)

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
