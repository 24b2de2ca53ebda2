package rig

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/signal"
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
		if s.Blocked != "" {
			return ExitFail // no target to fail, but the recipe failed its evals
		}
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

// ExitCodeOf is the exit code of a run that returned s and err. A sweep
// stopped because its metrics went away exits as its target failed or as
// no data. A phase that failed (a post-flight that found the engine still
// busy or could not check it included) is a rig error; an interrupted run exits with the code of what it measured,
// or as a rig error when it was interrupted before any step was judged.
func ExitCodeOf(s report.Summary, err error) int {
	if err == nil {
		return ExitCode(s)
	}
	var pe *PhaseError
	var intr *Interrupted
	var gone *sweep.MetricsGone
	switch {
	case errors.As(err, &gone):
		// the metrics went away: what was judged stands, the rest is no
		// data, whatever post-flight could not check after
		if ExitCode(s) == ExitFail {
			return ExitFail
		}
		return ExitUnsure
	case errors.As(err, &pe):
		return ExitRigError
	case errors.As(err, &intr) && len(s.Steps) > 0:
		return ExitCode(s)
	}
	return ExitRigError
}

// Judge re-judges a saved run from its scrapes and records, under bar when
// given, without sending load. The run directory is not changed. Under the
// run's own bar it gives every verdict and figure the live run gave.
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
	res := sweep.Result{StopReason: "re-judged from the saved run", Steps: rejudge(plan, saved), Warnings: saved.Warnings}
	res.Capacity = sweep.CapacityOf(sweep.Points(res.Steps))
	prev, prevErr := ReadSummary(d)
	if prevErr == nil {
		res.PostFlight = prev.PostFlight
	}
	sum := Summarize(cfg, res)
	markCacheHits(&sum, res.Steps, saved.Samples)
	sum.RunDir = d.Path()
	if prevErr == nil {
		sum.Started, sum.WallS, sum.Versions, sum.Calibration = prev.Started, prev.WallS, prev.Versions, prev.Calibration
		sum.Phases = rejudgedPhases(prev.Phases, res.Capacity, bar != nil)
		sum.OverContext = prev.OverContext
	}
	// a suite that failed with confidence blocks the recipe whatever the
	// bar: evals.json says so as it said to the live run
	why, err := readBlock(d)
	if err != nil {
		return sum, err
	}
	if why != "" {
		sum.Block(why)
	}
	return sum, nil
}

// rejudgedPhases keeps the live run's phases, which cannot be run again,
// but says the capacity that was judged now, not the one the live run
// printed: re-judged under another bar, the old line could read "not
// established" above a capacity of 8. Under another bar the sweep's line is
// marked as the live run's, since its stop reason was judged under the
// run's own bar.
func rejudgedPhases(live []report.Phase, c sweep.Capacity, otherBar bool) []report.Phase {
	out := slices.Clone(live)
	for i := range out {
		switch out[i].Name {
		case PhaseCapacity:
			out[i].Detail = c.String()
		case PhaseSweep:
			if otherBar && out[i].Detail != "" {
				out[i].Detail = "as run, under the run's own bar: " + out[i].Detail
			}
		}
	}
	return out
}

// rejudge judges each saved step again from the saved scrapes and records,
// as the live sweep did: a repeat pools its windows with the step it
// repeats, and the parts measured outside the server's metrics (evals under
// load), which cannot be re-derived, are kept as they were judged.
func rejudge(plan sweep.Plan, saved Saved) []sweep.StepResult {
	byStep := map[int][]load.Record{}
	for _, r := range saved.Records {
		if r.Phase == load.PhaseMeasure {
			byStep[r.Step] = append(byStep[r.Step], r)
		}
	}
	var out []sweep.StepResult
	for _, st := range saved.Steps {
		j := sweep.JudgeStep(plan, st, saved.Samples, byStep[st.Index])
		if st.RepeatOf >= 0 {
			for _, prev := range out {
				if prev.Index == st.RepeatOf {
					j = sweep.Pool(plan, prev, j)
				}
			}
		}
		for _, part := range st.Judged.Parts {
			if part.Name != verdict.PartTTFT && part.Name != verdict.PartInteractivity && part.Name != verdict.PartErrors {
				j.Judged = sweep.WithParts(j.Judged, part)
			}
		}
		out = append(out, j)
	}
	return out
}

// markCacheHits says, for each step of the summary, whether the server
// reported its prefix-cache hits over the step's judged time; a hit rate it
// does not report reads "not reported", never 0%.
func markCacheHits(sum *report.Summary, steps []sweep.StepResult, samples []signal.Sample) {
	for i := range sum.Steps {
		if i >= len(steps) {
			return
		}
		from := time.Duration(steps[i].MeasureStart * float64(time.Second))
		to := time.Duration(steps[i].End * float64(time.Second))
		reported := false
		for _, s := range samples {
			if s.At < from || s.At > to {
				continue
			}
			// the cached prompt tokens, or the prefix cache's hits and lookups
			_, cached := s.Counter[signal.PromptTokensCached]
			_, hits := s.Counter[signal.PrefixCacheHits]
			_, queries := s.Counter[signal.PrefixCacheQueries]
			if cached || hits && queries {
				reported = true
				break
			}
		}
		sum.Steps[i].SetCacheReported(reported || sum.Steps[i].CacheReported)
	}
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
