package rig

import (
	"context"
	"errors"
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
	if !p.Fits || p.GPUs != 16 || len(p.Steps) != len(cfg.Sweep.Ladder) {
		t.Errorf("default plan: fits %v, %d GPUs, %d steps", p.Fits, p.GPUs, len(p.Steps))
	}
	// 5 steps x 16 min + 2 repeats + 2 min pre-flight + 5 min drain = 119 min
	if p.Minutes < 118 || p.Minutes > 120 {
		t.Errorf("worst case %g minutes, want 119", p.Minutes)
	}
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

// TestRollbackAlwaysRuns deploys with the command deployer, fails in
// pre-flight, and checks the undeploy command still ran.
func TestRollbackAlwaysRuns(t *testing.T) {
	cfg := againstSim(t, sim.DefaultProfile())
	dir := t.TempDir()
	up, down := filepath.Join(dir, "deployed"), filepath.Join(dir, "rolled-back")
	cfg.Recipe.Model = "not-served" // pre-flight fails after the rollout
	cfg.Recipe.Deploy = recipe.Deploy{Type: recipe.DeployCommand, PollS: 0.05, ReadyTimeoutS: 5, RollbackTimeoutS: 5,
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
