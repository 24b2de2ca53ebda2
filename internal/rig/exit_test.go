package rig

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

func TestExitCodeOf(t *testing.T) {
	held := report.Summary{Steps: []report.Step{{Sessions: 2}}, Target: &sweep.TargetVerdict{Verdict: verdict.Pass}}
	failed := report.Summary{Steps: []report.Step{{Sessions: 2}}, Target: &sweep.TargetVerdict{Verdict: verdict.Fail}}
	noData := report.Summary{Target: &sweep.TargetVerdict{Verdict: verdict.NoData}}
	intr := &Interrupted{Dir: "runs/x"}
	dirty := &PhaseError{Phase: PhasePostflight, Err: errors.New("the engine is not idle")}
	cases := []struct {
		name string
		sum  report.Summary
		err  error
		want int
	}{
		// a finished run exits with its target's verdict
		{"held", held, nil, ExitHeld},
		{"failed", failed, nil, ExitFail},
		{"no data", noData, nil, ExitUnsure},
		// a phase that failed is a rig error whatever the summary says
		{"pre-flight failed", report.Summary{}, &PhaseError{Phase: PhasePreflight, Err: errors.New("down")}, ExitRigError},
		// interrupted after a verdict: the code of what it measured
		{"interrupted after a step", failed, intr, ExitFail},
		// interrupted before any step finished: no verdict, a rig error
		{"interrupted before a verdict", noData, intr, ExitRigError},
		// the engine is not back where it started: the run is not over
		{"dirty post-flight", held, dirty, ExitRigError},
		{"interrupted and dirty", held, errors.Join(intr, dirty), ExitRigError},
	}
	for _, c := range cases {
		if got := ExitCodeOf(c.sum, c.err); got != c.want {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.want)
		}
	}
}

// judgedStep is a step whose three bar parts read v (pass or no data).
func judgedStep(index, sessions int, v verdict.Verdict) sweep.StepResult {
	var parts []verdict.Part
	for _, name := range []string{verdict.PartTTFT, verdict.PartInteractivity, verdict.PartErrors} {
		p := verdict.Part{Name: name, Verdict: v}
		switch {
		case v == verdict.NoData:
			// what verdict.Judge leaves in a part it could not measure
		case name == verdict.PartTTFT:
			p.Value, p.Bar = stats.Summary{Center: 2, Lo: 1.5, Hi: 2.5}, 5.3
		case name == verdict.PartInteractivity:
			p.Value, p.Bar = stats.Summary{Center: 40, Lo: 35, Hi: 45}, 10
		default:
			p.Value, p.Bar = stats.Summary{Center: 0.001, Lo: 0, Hi: 0.005}, 0.02
		}
		if v == verdict.Fail && name == verdict.PartTTFT {
			p.Value = stats.Summary{Center: 9, Lo: 8, Hi: 10}
		}
		parts = append(parts, p)
	}
	return sweep.StepResult{Index: index, Sessions: sessions, RepeatOf: -1, Judged: verdict.Step{Verdict: v, Parts: parts}}
}

// TestTargetWithoutEvidenceIsNoData: a target is a fail only when a step
// failed; steps that read no data, or no step at all, leave it no data.
func TestTargetWithoutEvidenceIsNoData(t *testing.T) {
	pass, fail, none := verdict.Pass, verdict.Fail, verdict.NoData
	cases := []struct {
		name   string
		steps  []sweep.StepResult
		target int
		want   verdict.Verdict
	}{
		// 2 held, 4 read no data: nothing says the recipe cannot hold 4
		{"no data above a pass", []sweep.StepResult{judgedStep(0, 2, pass), judgedStep(1, 4, none)}, 4, none},
		// nor 6, which was never run
		{"no data below the target", []sweep.StepResult{judgedStep(0, 2, pass), judgedStep(1, 4, none)}, 6, none},
		// the first step read no data
		{"no data at the first step", []sweep.StepResult{judgedStep(0, 2, none)}, 2, none},
		// interrupted before any step finished
		{"no step", nil, 4, none},
		// a real failure stays a failure
		{"a step failed", []sweep.StepResult{judgedStep(0, 2, pass), judgedStep(1, 4, fail)}, 4, fail},
		{"held", []sweep.StepResult{judgedStep(0, 2, pass), judgedStep(1, 4, pass)}, 4, pass},
	}
	for _, c := range cases {
		cfg := config.Default()
		cfg.Sweep.Target, cfg.Sweep.Stress = c.target, 0
		res := sweep.Result{Steps: c.steps, Capacity: sweep.CapacityOf(sweep.Points(c.steps))}
		sum := Summarize(cfg, res)
		if sum.Target == nil || sum.Target.Verdict != c.want {
			t.Errorf("%s: target %+v, want %s", c.name, sum.Target, c.want)
		}
	}
}

// TestTargetStepDecidesTheTarget: the target is the step that must pass,
// so where the ladder ran it, that step's own verdict (pooled with its
// repeat) is the target's. Against llm-d-inference-sim, 8 sessions passed
// twice (P90 interactivity 12.9 and 12.5 tokens/s, their intervals' lower
// bound on the bucket edge 10.0 = the bar) while the capacity fitted from
// every step read 10.2 (7.99-11.5), and the target read too close.
func TestTargetStepDecidesTheTarget(t *testing.T) {
	pass, fail := verdict.Pass, verdict.Fail
	cases := []struct {
		name  string
		steps []sweep.StepResult
		c     sweep.Capacity
		want  verdict.Verdict
	}{
		{"the step at the target passed; the curve's bound dips below it",
			[]sweep.StepResult{judgedStep(0, 4, pass), judgedStep(1, 8, pass), judgedStep(2, 16, fail)},
			sweep.Capacity{Sessions: 10.2, Lo: 7.99, Hi: 11.5, Bracket: [2]int{8, 16}}, pass},
		{"the step at the target failed; the curve's bound is above it",
			[]sweep.StepResult{judgedStep(0, 4, pass), judgedStep(1, 8, fail)},
			sweep.Capacity{Sessions: 8.5, Lo: 8.1, Hi: 9, Bracket: [2]int{4, 8}}, fail},
		{"a repeat's pooled verdict is the one that counts",
			[]sweep.StepResult{judgedStep(0, 4, pass), judgedStep(1, 8, fail), judgedStep(2, 8, pass), judgedStep(3, 16, fail)},
			sweep.Capacity{Sessions: 9, Lo: 7.5, Hi: 12, Bracket: [2]int{8, 16}}, pass},
		{"the step at the target read too close and none above passed: a capacity of '>= 8' cannot pass it",
			[]sweep.StepResult{judgedStep(0, 4, pass), judgedStep(1, 8, verdict.TooClose)},
			sweep.Capacity{Sessions: 8, Lo: 8, Hi: 8, AtLeast: true, HiOpen: true, TooClose: []int{8}, Bracket: [2]int{4, 8}}, verdict.TooClose},
		{"the step at the target read too close, a step above passed: the capacity decides",
			[]sweep.StepResult{judgedStep(0, 4, verdict.TooClose), judgedStep(1, 8, verdict.TooClose), judgedStep(2, 12, pass)},
			sweep.Capacity{Sessions: 12, Lo: 12, Hi: 12, AtLeast: true, HiOpen: true, TooClose: []int{4, 8}, Bracket: [2]int{12, 0}}, pass},
		{"the step at the target had no data: the capacity's pass cannot stand",
			[]sweep.StepResult{judgedStep(0, 4, pass), judgedStep(1, 8, verdict.NoData)},
			sweep.Capacity{Sessions: 8, Lo: 8, Hi: 8, HiOpen: true, Bracket: [2]int{4, 8}}, verdict.NoData},
		{"no step at the target: the capacity interval decides",
			[]sweep.StepResult{judgedStep(0, 4, pass), judgedStep(1, 16, fail)},
			sweep.Capacity{Sessions: 10, Lo: 7.5, Hi: 12, Bracket: [2]int{4, 16}}, verdict.TooClose},
	}
	for _, c := range cases {
		cfg := config.Default()
		cfg.Sweep.Target, cfg.Sweep.Stress = 8, 0
		sum := Summarize(cfg, sweep.Result{Steps: c.steps, Capacity: c.c})
		if sum.Target == nil || sum.Target.Verdict != c.want {
			t.Errorf("%s: target %+v, want %s", c.name, sum.Target, c.want)
		}
	}
}

// TestFailedPreflightReportsNoCapacity: a run stopped by pre-flight measured
// nothing: no capacity, no target verdict, a rig error, and --json carries
// the error.
func TestFailedPreflightReportsNoCapacity(t *testing.T) {
	cfg := againstSim(t, sim.DefaultProfile())
	cfg.Recipe.Model = "not-served"
	sum, err := Run(context.Background(), Options{Config: cfg})
	if ExitCodeOf(sum, err) != ExitRigError {
		t.Errorf("exit %d after a failed pre-flight, want %d (err %v)", ExitCodeOf(sum, err), ExitRigError, err)
	}
	if sum.Target != nil {
		t.Errorf("target %+v after a failed pre-flight, want none", sum.Target)
	}
	if !strings.Contains(sum.Error, "not-served") {
		t.Errorf("summary error %q does not say what went wrong", sum.Error)
	}
	b, _ := json.Marshal(sum)
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["capacity"] != nil {
		t.Errorf("capacity %v in JSON after a failed pre-flight, want null", raw["capacity"])
	}
	var text strings.Builder
	report.WriteText(&text, sum)
	if strings.Contains(text.String(), "0 sessions") || !strings.Contains(text.String(), "capacity: not measured") {
		t.Errorf("the text summary of a failed pre-flight:\n%s", text.String())
	}
}

// TestDirtyPostflightIsARigError: the engine stalls and ignores the
// client's disconnects, so requests are still running when the drain ends:
// the run is not over, and it says so with a rig error.
func TestDirtyPostflightIsARigError(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short sweep")
	}
	cfg := config.Default()
	// On the virtual clock pre-flight takes the same few modelled seconds
	// however loaded the host is, so the stall never begins before any
	// load went out (at a scaled wall clock it once did).
	cfg.TimeScale = config.Virtual
	cfg.Recipe.Sim.Faults = []byte(`{"ignore_disconnects": true, "stall": {"at_s": 75, "for_s": 100000}}`)
	cfg.Evals.Suites, cfg.Evals.UnderLoadShare = nil, 0
	cfg.Sweep.Ladder, cfg.Sweep.Target, cfg.Sweep.Stress = []int{2}, 2, 0
	cfg.Sweep.WarmupS, cfg.Sweep.StepS, cfg.Sweep.DrainS, cfg.Workload.PrimeTimeoutS = 45, 90, 30, 45
	cfg.Workload.SynthSessions = 40
	cfg.Output = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), Options{Config: cfg})
	var pe *PhaseError
	if !errors.As(err, &pe) || pe.Phase != PhasePostflight || ExitCodeOf(sum, err) != ExitRigError {
		t.Fatalf("err = %v (exit %d), want a post-flight rig error; post-flight %+v", err, ExitCodeOf(sum, err), sum.PostFlight)
	}
	if !strings.Contains(err.Error(), "not back where it started") || sum.Error == "" {
		t.Errorf("the error does not say why the run is not over: %v (summary error %q)", err, sum.Error)
	}
}

// TestNoDataIsShownAsNoData: a part that could not be measured reads "no
// data" on the terminal and null in JSON, never 0.00 (0.00-0.00); a cache
// hit rate the server does not report reads "not reported".
func TestNoDataIsShownAsNoData(t *testing.T) {
	cfg := config.Default()
	st := judgedStep(0, 2, verdict.NoData)
	st.Tokens = sweep.Tokens{Prompt: 1000} // no prefix-cache counter
	res := sweep.Result{Steps: []sweep.StepResult{st}, Capacity: sweep.CapacityOf(sweep.Points([]sweep.StepResult{st}))}
	sum := Summarize(cfg, res)
	var text strings.Builder
	report.WriteText(&text, sum)
	if strings.Contains(text.String(), "0.00 (0.00-0.00)") || strings.Contains(text.String(), "0.0 (0.0-0.0)") || !strings.Contains(text.String(), "not reported") {
		t.Errorf("no-data values on the terminal:\n%s", text.String())
	}
	if md := string(report.Markdown(sum)); strings.Contains(md, "NaN") || strings.Contains(md, "| 0 | 0-0 |") {
		t.Errorf("no-data values in report.md:\n%s", md)
	}
	b, _ := json.Marshal(sum)
	var raw struct {
		Steps []struct {
			TTFT  struct{ Value *float64 } `json:"ttft_p90"`
			Parts []struct {
				Value struct{ Value *float64 } `json:"value"`
			} `json:"parts"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if v := raw.Steps[0].TTFT.Value; v != nil {
		t.Errorf("ttft_p90 of a no-data step is %g in JSON, want null", *v)
	}
	for i, p := range raw.Steps[0].Parts {
		if p.Value.Value != nil {
			t.Errorf("part %d of a no-data step has value %g in JSON, want null", i, *p.Value.Value)
		}
	}
	var back report.Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(back.Steps[0].TTFTP90.Center) || !math.IsNaN(back.Steps[0].Parts[0].Value.Center) {
		t.Errorf("null did not read back as no data: %+v", back.Steps[0].TTFTP90)
	}
}
