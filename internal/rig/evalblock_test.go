package rig

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// blockedRun is a one-step virtual run whose only eval suite, three
// arithmetic cases the simulator cannot answer, fails with confidence.
func blockedRun(t *testing.T, stopOnFail bool) config.Run {
	t.Helper()
	dir := t.TempDir()
	cases := `{"id": "a", "prompt": "What is 17 * 3? Reply with the number only.", "expect": {"exact": "51"}, "max_tokens": 8}
{"id": "b", "prompt": "What is 6 * 7? Reply with the number only.", "expect": {"exact": "42"}, "max_tokens": 8}
{"id": "c", "prompt": "What is 9 * 9? Reply with the number only.", "expect": {"exact": "81"}, "max_tokens": 8}
`
	file := filepath.Join(dir, "arith.jsonl")
	if err := os.WriteFile(file, []byte(cases), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.TimeScale = config.Virtual
	cfg.Evals.Suites, cfg.Evals.Custom, cfg.Evals.UnderLoadShare = nil, []string{file}, 0.05
	cfg.Evals.StopOnFail = stopOnFail
	cfg.Sweep.Ladder, cfg.Sweep.Target, cfg.Sweep.Stress = []int{4}, 4, 0
	cfg.Sweep.WarmupS, cfg.Sweep.StepS, cfg.Workload.PrimeTimeoutS = 240, 600, 240
	cfg.Workload.SynthSessions = 40
	cfg.Output = filepath.Join(dir, "runs")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func phaseNamed(sum report.Summary, name string) *report.Phase {
	for i := range sum.Phases {
		if sum.Phases[i].Name == name {
			return &sum.Phases[i]
		}
	}
	return nil
}

// TestFailedEvalsBlockButCapacityIsMeasured: a suite that fails with
// confidence blocks the recipe (its target reads fail, exit 2, the reports
// say why), but the sweep still measures capacity (on speed and errors: no
// evals under load, which would fail each step on what blocked it already), as the reference method
// asks of evals (run beside the sweep; they block, they do not hide the
// number). Before, the run stopped after the evals with no capacity, so a
// first run against a server that cannot answer the suites (an engine
// simulator) measured nothing. `judge` reads the block from evals.json.
func TestFailedEvalsBlockButCapacityIsMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short sweep")
	}
	sum, err := Run(context.Background(), Options{Config: blockedRun(t, false)})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if p := phaseNamed(sum, PhaseEvals); p == nil || p.Status != "failed" || !strings.Contains(p.Detail, "arith 0/3") {
		t.Errorf("evals phase %+v: want failed, naming arith 0/3", p)
	}
	if p := phaseNamed(sum, PhaseSweep); p == nil || p.Status != "ok" {
		t.Errorf("sweep phase %+v: want ok (it runs although the evals failed)", p)
	}
	if len(sum.Steps) != 1 || sum.Steps[0].Verdict != verdict.Pass {
		t.Fatalf("steps %+v: want the one step judged, and pass on speed", sum.Steps)
	}
	for _, p := range sum.Steps[0].Parts {
		if p.Name == "tool_calls" {
			t.Errorf("step has a tool_calls part %+v: a blocked recipe's steps are judged on speed and errors", p)
		}
	}
	said := false
	for _, w := range sum.Warnings {
		said = said || strings.Contains(w, "evals under load were not sent")
	}
	if !said {
		t.Errorf("warnings %q: want one saying the evals under load were not sent", sum.Warnings)
	}
	if sum.Capacity.Sessions < 4 {
		t.Errorf("capacity %s: want it measured (>= 4)", sum.Capacity)
	}
	if sum.Target == nil || sum.Target.Verdict != verdict.Fail || !strings.Contains(sum.Target.Blocked, "arith 0/3") {
		t.Errorf("target %+v: want fail, blocked by arith", sum.Target)
	}
	if code := ExitCodeOf(sum, err); code != ExitFail {
		t.Errorf("exit %d, want %d", code, ExitFail)
	}
	var text strings.Builder
	if err := report.WriteText(&text, sum); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "blocked: mini evals failed: arith 0/3") {
		t.Errorf("the terminal does not say the recipe is blocked:\n%s", text.String())
	}
	if md := report.Markdown(sum); !strings.Contains(string(md), "**Blocked:** mini evals failed") {
		t.Errorf("report.md does not say the recipe is blocked")
	}
	d, err := report.OpenDir(sum.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Judge(d, nil)
	if err != nil {
		t.Fatalf("judge: %v", err)
	}
	if again.Target == nil || again.Target.Verdict != verdict.Fail || again.Blocked != sum.Blocked {
		t.Errorf("judge: target %+v, blocked %q; want what the live run said: %q", again.Target, again.Blocked, sum.Blocked)
	}
	if ExitCode(again) != ExitFail {
		t.Errorf("judge exit %d, want %d", ExitCode(again), ExitFail)
	}
}

// TestStopOnFailEndsTheRunAtTheEvals: evals.stop_on_fail spares the window,
// as the run did before by default: no step, a rig error.
func TestStopOnFailEndsTheRunAtTheEvals(t *testing.T) {
	sum, err := Run(context.Background(), Options{Config: blockedRun(t, true)})
	var pe *PhaseError
	if !errors.As(err, &pe) || pe.Phase != PhaseEvals {
		t.Fatalf("run: %v; want the evals phase's error", err)
	}
	if len(sum.Steps) != 0 {
		t.Errorf("%d steps: want none", len(sum.Steps))
	}
	if p := phaseNamed(sum, PhaseSweep); p == nil || p.Status != "skipped" {
		t.Errorf("sweep phase %+v: want skipped", p)
	}
	if !strings.Contains(sum.Blocked, "arith 0/3") {
		t.Errorf("blocked %q: the summary should say what blocked the recipe", sum.Blocked)
	}
	if code := ExitCodeOf(sum, err); code != ExitRigError {
		t.Errorf("exit %d, want %d", code, ExitRigError)
	}
}
