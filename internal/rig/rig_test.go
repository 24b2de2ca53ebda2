package rig

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sim"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

func TestPlanFitsTheWindow(t *testing.T) {
	cfg := config.Default()
	cfg.Workload.SynthSessions = 40
	p, err := MakePlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.GPUs != 16 || len(p.Steps) != len(cfg.Sweep.Ladder) {
		t.Errorf("default plan: %d GPUs, %d steps", p.GPUs, len(p.Steps))
	}
	// 5 steps x 16 min + 2 repeats + 2 min pre-flight + 78 eval cases x
	// 10 s + 5 min drain = 132 min: the default's 900 s steps are sized
	// for a sweep alone (a run without a run file cuts them to fit)
	if want := 119 + 78*evalCaseS/60; math.Abs(p.Minutes-want) > 1e-9 || p.Fits != (want <= cfg.Sweep.GPUWindowMin) {
		t.Errorf("worst case %g minutes (fits %v), want %g", p.Minutes, p.Fits, want)
	}
	cfg.Sweep.StepS = 780
	if p, _ := MakePlan(cfg); !p.Fits {
		t.Errorf("780 s steps: %g minutes do not fit the %g-minute window", p.Minutes, p.WindowMin)
	}
	cfg.Sweep.StepS = 900
	for _, s := range p.Steps {
		if s.Requests <= 0 {
			t.Errorf("step of %d sessions expects %d requests", s.Sessions, s.Requests)
		}
	}
	var ttft *PlanSignal
	for i := range p.Signals {
		if p.Signals[i].Signal == "ttft_seconds" {
			ttft = &p.Signals[i]
		}
	}
	if ttft == nil || !strings.Contains(strings.Join(ttft.Sources, " "), "vllm:time_to_first_token_seconds") {
		t.Errorf("the plan does not say where TTFT comes from: %+v", p.Signals)
	}
	cfg.Sweep.GPUWindowMin = 30
	if p, _ = MakePlan(cfg); p.Fits {
		t.Error("a 119-minute plan fits a 30-minute window")
	}
}

func TestExitCode(t *testing.T) {
	cases := []struct {
		target *sweep.TargetVerdict
		want   int
	}{
		{nil, ExitHeld}, // no target: the run finished
		{&sweep.TargetVerdict{Verdict: verdict.Pass}, ExitHeld},
		{&sweep.TargetVerdict{Verdict: verdict.Fail}, ExitFail},
		{&sweep.TargetVerdict{Verdict: verdict.TooClose}, ExitUnsure},
		{&sweep.TargetVerdict{Verdict: verdict.NoData}, ExitUnsure},
	}
	for _, c := range cases {
		if got := ExitCode(report.Summary{Target: c.target}); got != c.want {
			t.Errorf("target %+v: exit %d, want %d", c.target, got, c.want)
		}
	}
}

// againstSim returns a run file aimed at a simulator already serving on
// loopback, as a real endpoint would be.
func againstSim(t *testing.T, p sim.Profile) config.Run {
	t.Helper()
	s, err := sim.New(sim.Options{Profile: p, Scale: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cfg := config.Default()
	cfg.Recipe.Endpoint, cfg.Recipe.Metrics, cfg.TimeScale = url, []string{url + "/metrics"}, 1
	cfg.Workload.SynthSessions = 8
	cfg.Evals.Suites = nil
	cfg.Output = t.TempDir()
	return cfg
}

func TestPreflightStopsABrokenRecipe(t *testing.T) {
	cases := []struct {
		name   string
		change func(*config.Run)
		want   string
	}{
		// the wrong model is live
		{"wrong model", func(c *config.Run) { c.Recipe.Model = "other-model" }, `does not serve model "other-model"`},
		// the recipe says 128K, the server serves 512K: the wrong recipe is live
		{"wrong context", func(c *config.Run) { c.Recipe.MaxModelLen = 131072 }, "the wrong recipe is live"},
		// the recipe says SGLang, the server's metrics are vLLM's
		{"wrong engine", func(c *config.Run) { c.Recipe.Engine = "sglang" }, "the server's metrics are vllm's"},
		// an SGLang mapping against a vLLM server finds none of the bar's signals
		{"missing signals", func(c *config.Run) { c.Recipe.Mapping = "sglang" }, "the bar needs signals the server does not report"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := againstSim(t, sim.DefaultProfile())
			c.change(&cfg)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			sum, err := Run(context.Background(), Options{Config: cfg})
			var pe *PhaseError
			if !errors.As(err, &pe) || pe.Phase != PhasePreflight || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want a pre-flight failure saying %q", err, c.want)
			}
			if len(sum.Steps) != 0 {
				t.Errorf("%d steps ran after a failed pre-flight", len(sum.Steps))
			}
			if len(sum.Phases) == 0 || sum.Phases[0].Name != PhasePreflight || sum.Phases[0].Status != "failed" {
				t.Errorf("phases %+v: want pre-flight failed first", sum.Phases)
			}
			if _, err := os.Stat(filepath.Join(sum.RunDir, "summary.json")); err != nil {
				t.Errorf("no summary.json for the failed run: %v", err)
			}
		})
	}
}

// TestRollbackAlwaysRuns deploys with the command deployer, fails in the
// rollout, and checks the undeploy command still ran.
func TestRollbackAlwaysRuns(t *testing.T) {
	cfg := againstSim(t, sim.DefaultProfile())
	dir := t.TempDir()
	up, down := filepath.Join(dir, "deployed"), filepath.Join(dir, "rolled-back")
	cfg.Recipe.Model = "not-served" // the rollout's ready wait never sees the model, and times out
	cfg.Recipe.Deploy = recipe.Deploy{Type: recipe.DeployCommand, PollS: 0.05, ReadyTimeoutS: 1, RollbackTimeoutS: 5,
		Command: &recipe.CommandSpec{Deploy: []string{"touch", up}, Undeploy: []string{"touch", down}, ReadyURL: cfg.Recipe.Endpoint + "/health"}}
	sum, err := Run(context.Background(), Options{Config: cfg})
	if err == nil {
		t.Fatal("a run whose rollout serves the wrong model passed")
	}
	for _, f := range []string{up, down} {
		if _, serr := os.Stat(f); serr != nil {
			t.Errorf("%s: the deploy or undeploy command did not run (%v); run error: %v", filepath.Base(f), serr, err)
		}
	}
	var names []string
	for _, p := range sum.Phases {
		names = append(names, p.Name+":"+p.Status)
	}
	got := strings.Join(names, " ")
	if !strings.HasPrefix(got, "rollout:") || !strings.Contains(got, "rollback:ok") {
		t.Errorf("phases %s: want the rollout first and an ok rollback last", got)
	}
}

func TestRemainingLadderOnResume(t *testing.T) {
	pass := sweep.StepResult{Sessions: 10, Judged: verdict.Step{Verdict: verdict.Pass}}
	fail := sweep.StepResult{Sessions: 10, Judged: verdict.Step{Verdict: verdict.Fail}}
	ladder := []int{5, 10, 15, 20}
	if got := remaining(ladder, []sweep.StepResult{pass}); len(got) != 2 || got[0] != 15 {
		t.Errorf("after a pass at 10: %v, want [15 20]", got)
	}
	if got := remaining(ladder, []sweep.StepResult{fail}); len(got) != 0 {
		t.Errorf("after a fail at 10 the sweep is over, got %v", got)
	}
	if got := remaining(ladder, nil); len(got) != 4 {
		t.Errorf("nothing done: %v", got)
	}
}

// TestToolCallsThatBreakOnlyUnderLoad: the simulator breaks tool-call
// arguments once more than 3 requests are in its engine. The evals before the
// sweep go one at a time and pass; the evals sent during the sweep's steps
// see the broken calls, and the step fails on its tool_calls part.
func TestToolCallsThatBreakOnlyUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short sweep")
	}
	cfg := config.Default()
	cfg.TimeScale = config.Virtual
	cfg.Recipe.Sim.Faults = []byte(`{"malformed_tool_calls_above": 3}`)
	cfg.Evals.Suites = []string{"tool_calling"}
	cfg.Evals.UnderLoadShare = 0.5
	cfg.Sweep.Ladder, cfg.Sweep.Target, cfg.Sweep.Stress = []int{8}, 8, 0
	cfg.Sweep.WarmupS, cfg.Sweep.StepS, cfg.Workload.PrimeTimeoutS = 240, 240, 240
	cfg.Workload.SynthSessions = 40
	cfg.Output = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), Options{Config: cfg})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	var evals *report.Phase
	for i := range sum.Phases {
		if sum.Phases[i].Name == PhaseEvals {
			evals = &sum.Phases[i]
		}
	}
	if evals == nil || evals.Status != "ok" || !strings.Contains(evals.Detail, "tool_calling 42/42") {
		t.Errorf("the one-at-a-time evals: %+v, want tool_calling 42/42 and ok", evals)
	}
	if len(sum.Steps) != 1 {
		t.Fatalf("%d steps, want 1", len(sum.Steps))
	}
	var part *verdict.Part
	for i := range sum.Steps[0].Parts {
		if sum.Steps[0].Parts[i].Name == "tool_calls" {
			part = &sum.Steps[0].Parts[i]
		}
	}
	if part == nil || part.Verdict != verdict.Fail || sum.Steps[0].Verdict != verdict.Fail {
		t.Errorf("under load: tool_calls part %+v, step %s; want both fail", part, sum.Steps[0].Verdict)
	}
}

// TestRehearsalFaultsGetTheRightVerdict injects the faults real fleets show
// and checks each produces the verdict a team must see, never a pass. The
// step runs on the virtual clock, long enough (6 sessions for 900 modelled
// seconds, about 200 turns) that the clean step passes: so "not a pass"
// comes from the fault, and each timed fault is checked to land inside the
// step's judged time.
func TestRehearsalFaultsGetTheRightVerdict(t *testing.T) {
	if testing.Short() {
		t.Skip("runs short sweeps")
	}
	// the judged time runs from 60 to 960 modelled seconds
	inJudged := func(t *testing.T, sum report.Summary, at float64) {
		t.Helper()
		if len(sum.Steps) > 0 && (at <= sum.Steps[0].MeasureStartS || at >= sum.Steps[0].EndS) {
			t.Errorf("the fault at %g s is outside the judged time %g-%g s: the case proves nothing", at, sum.Steps[0].MeasureStartS, sum.Steps[0].EndS)
		}
	}
	cases := []struct {
		name   string
		faults string
		check  func(t *testing.T, sum report.Summary, err error)
	}{
		// no fault: the step passes, so the faults below are what fail it
		{"clean", `{}`, func(t *testing.T, sum report.Summary, err error) {
			if len(sum.Steps) == 0 || sum.Steps[0].Verdict != verdict.Pass {
				t.Errorf("the clean step: %v (err %v), want pass", stepParts(sum), err)
			}
		}},
		// a fifth of requests refused with 503: the errors part fails
		{"refusals", `{"refuse": {"share": 0.2, "status": 503}}`, func(t *testing.T, sum report.Summary, err error) {
			if len(sum.Steps) == 0 || partVerdict(sum.Steps[0], "errors") != verdict.Fail {
				t.Errorf("errors part %v, want fail (err %v)", stepParts(sum), err)
			}
		}},
		// the TTFT family is missing from /metrics: pre-flight stops the run
		{"missing metrics", `{"missing_metrics": ["vllm:time_to_first_token_seconds"]}`, func(t *testing.T, sum report.Summary, err error) {
			var pe *PhaseError
			if !errors.As(err, &pe) || pe.Phase != PhasePreflight || !strings.Contains(err.Error(), "ttft_seconds") {
				t.Errorf("err = %v, want pre-flight to name the missing ttft_seconds", err)
			}
		}},
		// the engine stalls for a third of the step: no pass, and the verdict says why
		{"stall", `{"stall": {"at_s": 400, "for_s": 300}}`, func(t *testing.T, sum report.Summary, err error) {
			inJudged(t, sum, 400)
			if len(sum.Steps) == 0 || sum.Steps[0].Verdict == verdict.Pass {
				t.Errorf("a stalled engine's step: %v (err %v), want no pass", stepParts(sum), err)
			}
		}},
		// the engine crashes mid-step and comes back with counters reset
		{"crash", `{"crash": {"at_s": 420, "for_s": 60}}`, func(t *testing.T, sum report.Summary, err error) {
			inJudged(t, sum, 420)
			if len(sum.Steps) == 0 || sum.Steps[0].Verdict == verdict.Pass {
				t.Errorf("a crashed engine's step: %v (err %v), want no pass", stepParts(sum), err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each run has its own virtual clock
			cfg := config.Default()
			cfg.TimeScale = config.Virtual
			cfg.Recipe.Sim.Faults = []byte(c.faults)
			cfg.Evals.Suites, cfg.Evals.UnderLoadShare = nil, 0
			cfg.Sweep.Ladder, cfg.Sweep.Target, cfg.Sweep.Stress = []int{6}, 6, 0
			cfg.Sweep.WarmupS, cfg.Sweep.StepS, cfg.Sweep.DrainS = 60, 900, 120
			cfg.Workload.SynthSessions = 40
			cfg.Output = t.TempDir()
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			sum, err := Run(context.Background(), Options{Config: cfg})
			c.check(t, sum, err)
		})
	}
}

func partVerdict(s report.Step, name string) verdict.Verdict {
	for _, p := range s.Parts {
		if p.Name == name {
			return p.Verdict
		}
	}
	return ""
}

func stepParts(sum report.Summary) []string {
	var out []string
	for _, s := range sum.Steps {
		for _, p := range s.Parts {
			out = append(out, fmt.Sprintf("%d %s %s %.3g", s.Sessions, p.Name, p.Verdict, p.Value.Center))
		}
		out = append(out, fmt.Sprintf("warnings %v", s.Warnings))
	}
	return out
}
