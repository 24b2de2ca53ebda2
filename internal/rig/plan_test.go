package rig

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
)

// TestPlanCountsEvalCases: the mini-eval phase's minutes come from the
// configured suites' case counts (examples/run.yaml and the default
// configure two suites, 78 cases), not "no eval suites configured"; the
// fit line keeps minutes against the window and GPU-minutes apart, and a
// recipe with nothing deployed has nothing to roll back.
func TestPlanCountsEvalCases(t *testing.T) {
	for _, file := range []string{"", "../../examples/run.yaml"} {
		cfg := config.Default()
		if file != "" {
			var err error
			if cfg, err = config.Load(file); err != nil {
				t.Fatal(err)
			}
		}
		p, err := MakePlan(cfg)
		if err != nil {
			t.Fatal(err)
		}
		suites, err := Suites(cfg.Evals)
		if err != nil || len(suites) != 2 {
			t.Fatalf("%s: %d suites (%v), want the two configured", file, len(suites), err)
		}
		cases := 0
		for _, s := range suites {
			cases += len(s.Cases(cfg.Workload.Seed))
		}
		var evals, rollback PlanPhase
		for _, ph := range p.Phases {
			switch ph.Name {
			case PhaseEvals:
				evals = ph
			case PhaseRollback:
				rollback = ph
			}
		}
		if math.Abs(evals.Minutes-float64(cases)*evalCaseS/60) > 1e-9 || !strings.Contains(evals.What, fmt.Sprintf("%d cases", cases)) || strings.Contains(evals.What, "no eval suites") {
			t.Errorf("%s: mini evals %g min %q, want %d cases x %gs", file, evals.Minutes, evals.What, cases, evalCaseS)
		}
		if rollback.Minutes != 0 {
			t.Errorf("%s: rollback %g minutes with deploy: none", file, rollback.Minutes)
		}
		var text strings.Builder
		p.WriteText(&text)
		want := fmt.Sprintf("worst case: %.0f minutes against the %.0f-minute GPU window", p.Minutes, p.WindowMin)
		if !strings.Contains(text.String(), want) || strings.Contains(text.String(), "GPU-minutes against") {
			t.Errorf("%s: the fit line mixes units, want %q:\n%s", file, want, text.String())
		}
	}
	cfg := config.Default()
	cfg.Evals.Suites = nil
	if p, _ := MakePlan(cfg); p.Phases[1].Minutes != 0 || p.Phases[1].What != "no eval suites configured" {
		t.Errorf("no suites: %+v", p.Phases[1])
	}
}
