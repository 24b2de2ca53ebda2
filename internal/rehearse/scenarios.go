package rehearse

import (
	"errors"
	"fmt"
	"strings"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// Scenarios are the faults rehearsed on base, in the order the reference
// report's lessons name them, each with the verdict it must give. Fault
// times are modelled seconds from the simulator's start: inside the first
// step's judged time (pre-flight and calibration take a few modelled
// seconds; the warm-up follows).
func Scenarios(base config.Run) []Scenario {
	mid := base.Sweep.WarmupS + 0.4*base.Sweep.StepS
	never := func(o Outcome, ok ...verdict.Verdict) (string, bool) {
		v := firstStep(o.Summary)
		got := stepWords(o)
		for _, want := range ok {
			if v == want {
				return got, true
			}
		}
		return got, false
	}
	return []Scenario{
		{
			Name: "clean", Expected: "a capacity",
			Check: func(o Outcome) (string, bool) {
				v := firstStep(o.Summary)
				return stepWords(o) + "; capacity " + o.Summary.Capacity.String(), o.Err == nil && (v == verdict.Pass || v == verdict.TooClose)
			},
		},
		{
			Name: "crashed engine mid-step", Expected: "fail or no data, never pass",
			Faults: fmt.Sprintf(`{"crash": {"at_s": %g, "for_s": %g}}`, mid, 0.2*base.Sweep.StepS),
			Check:  func(o Outcome) (string, bool) { return never(o, verdict.Fail, verdict.NoData) },
		},
		{
			Name: "metrics gone", Expected: "no data (pre-flight stops, or the step reads no data)",
			Faults: `{"metrics_gone": true}`,
			Check: func(o Outcome) (string, bool) {
				if errPhase(o.Err) == rig.PhasePreflight {
					return "pre-flight stopped: " + short(detailOf(o.Summary, rig.PhasePreflight)), len(o.Summary.Steps) == 0
				}
				return never(o, verdict.NoData)
			},
		},
		{
			Name: "refused long prompts", Expected: "errors counted: not pass (faster TTFT from refusals must not pass)",
			Faults: `{"refuse": {"share": 0.2, "status": 400}}`,
			Check: func(o Outcome) (string, bool) {
				got, ok := never(o, verdict.Fail, verdict.TooClose)
				// the clean step reads too close on errors alone, so only a
				// failed errors part shows the refusals were counted
				return got + "; errors " + partWords(o.Summary, verdict.PartErrors), ok && partVerdict(o.Summary, verdict.PartErrors) == verdict.Fail
			},
		},
		{
			Name: "stall", Expected: "no data or fail, never pass",
			Faults: fmt.Sprintf(`{"stall": {"at_s": %g, "for_s": %g}}`, mid, 0.3*base.Sweep.StepS),
			Check:  func(o Outcome) (string, bool) { return never(o, verdict.NoData, verdict.Fail) },
		},
		{
			Name: "KV cache full mid-step", Expected: "not pass",
			Faults: fmt.Sprintf(`{"kv_capacity_tokens": 200000, "kv_shrink": {"at_s": %g, "for_s": %g}}`, mid, base.Sweep.StepS),
			Check: func(o Outcome) (string, bool) {
				// not too close: the clean step reads that, so it would not
				// show the fault at all
				return never(o, verdict.Fail, verdict.NoData)
			},
		},
		{
			Name: "warm-up that would eat the step", Expected: "reported: warm-up too short",
			Tweak: func(c *config.Run) { c.Sweep.WarmupS, c.Workload.PrimeTimeoutS = 1, 1 },
			Check: func(o Outcome) (string, bool) {
				st, d := phaseOf(o.Summary, rig.PhaseSweep)
				text := d + " " + strings.Join(o.Summary.Warnings, " ")
				return "sweep " + st + ": " + short(d), strings.Contains(text, "warm-up")
			},
		},
		{
			Name: "abandoned requests", Expected: "post-flight fails",
			Faults: `{"ignore_disconnects": true}`,
			Tweak:  func(c *config.Run) { c.Sweep.DrainS = 5 },
			Check: func(o Outcome) (string, bool) {
				st, d := phaseOf(o.Summary, rig.PhasePostflight)
				return "post-flight " + st + ": " + short(d), st == "failed"
			},
		},
		{
			Name: "malformed tool calls under load", Expected: "the step fails on tool_calls",
			Faults: `{"malformed_tool_calls_above": 1}`,
			Tweak:  func(c *config.Run) { c.Evals.UnderLoadShare = 0.5 },
			Check: func(o Outcome) (string, bool) {
				got, ok := never(o, verdict.Fail)
				return got + "; tool_calls " + partWords(o.Summary, "tool_calls"), ok && partVerdict(o.Summary, "tool_calls") == verdict.Fail
			},
		},
		{
			Name: "wrong model live", Expected: "pre-flight fails",
			Faults: `{"model": "some-other-model"}`,
			Check: func(o Outcome) (string, bool) {
				st, d := phaseOf(o.Summary, rig.PhasePreflight)
				return "pre-flight " + st + ": " + short(d), st == "failed" && len(o.Summary.Steps) == 0
			},
		},
		{
			Name: "slow start", Expected: "waited out: pre-flight ok, the step runs",
			Faults: `{"not_ready": {"at_s": 0, "for_s": 60}}`,
			Check: func(o Outcome) (string, bool) {
				st, d := phaseOf(o.Summary, rig.PhasePreflight)
				return "pre-flight " + st + ": " + short(d), st == "ok" && len(o.Summary.Steps) > 0
			},
		},
		{
			Name: "SIGINT mid-step", Expected: "interrupted; rollback still happens",
			Tweak: func(c *config.Run) {
				c.Recipe.Deploy = recipe.Deploy{Type: recipe.DeployCommand, PollS: 0.05, ReadyTimeoutS: 30, RollbackTimeoutS: 30,
					Command: &recipe.CommandSpec{Deploy: []string{"true"}, Undeploy: []string{"true"}}}
			},
			InterruptAtStep: 1,
			Check: func(o Outcome) (string, bool) {
				st, _ := phaseOf(o.Summary, rig.PhaseRollback)
				var in *rig.Interrupted
				return fmt.Sprintf("interrupted %v; rollback %s", errors.As(o.Err, &in), orNone(st)), errors.As(o.Err, &in) && st == "ok"
			},
		},
	}
}

func stepWords(o Outcome) string {
	v := firstStep(o.Summary)
	if v == "" {
		if o.Err != nil {
			return "no step: " + short(o.Err.Error())
		}
		return "no step"
	}
	return fmt.Sprintf("%d sessions %s", o.Summary.Steps[0].Sessions, v)
}

func detailOf(s report.Summary, phase string) string {
	_, d := phaseOf(s, phase)
	return d
}

func part(s report.Summary, name string) *verdict.Part {
	if len(s.Steps) == 0 {
		return nil
	}
	for i, p := range s.Steps[0].Parts {
		if p.Name == name {
			return &s.Steps[0].Parts[i]
		}
	}
	return nil
}

func partVerdict(s report.Summary, name string) verdict.Verdict {
	if p := part(s, name); p != nil {
		return p.Verdict
	}
	return ""
}

func partWords(s report.Summary, name string) string {
	p := part(s, name)
	if p == nil {
		return "not judged"
	}
	if name == verdict.PartErrors || name == "tool_calls" {
		return fmt.Sprintf("%s (%.1f%%)", p.Verdict, 100*p.Value.Center) // shares read as percentages
	}
	return fmt.Sprintf("%s (%.3g)", p.Verdict, p.Value.Center)
}

func orNone(s string) string {
	if s == "" {
		return "did not run"
	}
	return s
}
