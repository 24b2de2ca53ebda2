package rig

import (
	"encoding/json"
	"os"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// Exit codes of a run, documented in `headroom run --help`.
const (
	ExitHeld     = 0 // the target held (or, with no target, the run finished)
	ExitRigError = 1 // the rig could not measure: bad input, endpoint down, a phase failed, interrupted
	ExitFail     = 2 // the target failed the bar
	ExitUnsure   = 3 // the target was too close to call, or had no data
)

// ExitCode is the exit code a finished run's summary calls for.
func ExitCode(s report.Summary) int {
	if s.Target == nil {
		return ExitHeld
	}
	switch s.Target.Verdict {
	case verdict.Pass:
		return ExitHeld
	case verdict.Fail:
		return ExitFail
	}
	return ExitUnsure
}

// Judge re-judges a saved run from its scrapes and records, under bar when
// given, without sending load. The run directory is not changed.
func Judge(d *report.Dir, bar *config.Bar) (report.Summary, error) {
	saved, err := ReadRun(d)
	if err != nil {
		return report.Summary{}, err
	}
	cfg := saved.Config
	if bar != nil {
		cfg.Bar = *bar
	}
	plan := SweepPlan(cfg)
	byStep := map[int][]load.Record{}
	for _, r := range saved.Records {
		if r.Phase == load.PhaseMeasure {
			byStep[r.Step] = append(byStep[r.Step], r)
		}
	}
	res := sweep.Result{StopReason: "re-judged from the saved run"}
	for _, st := range saved.Steps {
		j := sweep.JudgeStep(plan, st, saved.Samples, byStep[st.Index])
		if st.RepeatOf >= 0 {
			for _, prev := range res.Steps {
				if prev.Index == st.RepeatOf {
					j = sweep.Pool(plan, prev, j)
				}
			}
		}
		// parts measured outside the server's metrics (evals under load)
		// cannot be re-derived: keep them as they were judged
		for _, part := range st.Judged.Parts {
			if part.Name != verdict.PartTTFT && part.Name != verdict.PartInteractivity && part.Name != verdict.PartErrors {
				j.Judged = sweep.WithParts(j.Judged, part)
			}
		}
		res.Steps = append(res.Steps, j)
	}
	res.Capacity = sweep.CapacityOf(sweep.Points(res.Steps))
	sum := Summarize(cfg, res)
	sum.RunDir = d.Path()
	if prev, err := ReadSummary(d); err == nil {
		sum.PostFlight, sum.Started, sum.WallS, sum.Versions, sum.Calibration = prev.PostFlight, prev.Started, prev.WallS, prev.Versions, prev.Calibration
		sum.Phases = prev.Phases
		sum.OverContext = prev.OverContext
	}
	return sum, nil
}

// ReadSummary reads a run directory's summary.json.
func ReadSummary(d *report.Dir) (report.Summary, error) {
	var s report.Summary
	b, err := os.ReadFile(d.File("summary.json"))
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}
