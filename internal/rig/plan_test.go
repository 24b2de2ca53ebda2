package rig

import (
	"fmt"
	"math"
	"slices"
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

// TestPlanWarnsOfSingleLaneTiers: a step where a tier of the mix has one
// lane cannot read how that tier's sessions differ (llm-d-inference-sim at
// 2 sessions read TTFT 2.38 s with an interval of 0.15-37 s, and plan said
// nothing). Half and half: 2 and 3 sessions have a single lane in a tier,
// 4 has two in each; one tier alone resamples its lanes together.
func TestPlanWarnsOfSingleLaneTiers(t *testing.T) {
	cases := []struct {
		ladder       []int
		heavy, light float64
		want         string // in the note; "" for no note
	}{
		{[]int{2, 3, 4, 8}, 0.5, 0.5, "at 2, 3 sessions the heavy and light tiers have a single lane each"},
		{[]int{3, 6}, 0.5, 0.5, "at 3 sessions the light tier has a single lane"},
		{[]int{4, 8, 12}, 0.5, 0.5, ""},
		{[]int{2, 4}, 1, 0, ""},
		// 4 sessions give the light tenth no lane, 8 give it one; its
		// second comes at 16
		{[]int{4, 8}, 0.9, 0.1, "at 8 sessions the light tier has a single lane"},
		{[]int{4, 8}, 0.9, 0.1, "two lanes in every tier of this mix is 16 sessions"},
	}
	for _, c := range cases {
		cfg := config.Default()
		cfg.Sweep.Ladder, cfg.Workload.Mix.Heavy, cfg.Workload.Mix.Light = c.ladder, c.heavy, c.light
		p, err := MakePlan(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, n := range p.Notes {
			if strings.Contains(n, "single lane") {
				got = n
			}
		}
		switch {
		case c.want == "" && got != "":
			t.Errorf("ladder %v, mix %g/%g: note %q, want none", c.ladder, c.heavy, c.light, got)
		case c.want != "" && !strings.Contains(got, c.want):
			t.Errorf("ladder %v, mix %g/%g: note %q, want it to say %q", c.ladder, c.heavy, c.light, got, c.want)
		}
	}
}

// TestPlanCountsTheAdaptiveSweepsSteps: an adaptive sweep doubles from the
// ladder's first step and bisects, so it runs other steps than the ladder
// and may run more of them (the default's ladder: 4, 8, 16, 12, 10, 9 for a
// capacity of 8, six steps where the ladder has five). Plan had printed the
// ladder's steps and minutes for it.
func TestPlanCountsTheAdaptiveSweepsSteps(t *testing.T) {
	cfg := config.Default()
	ladder, err := MakePlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sweep.Mode = "adaptive"
	p, err := MakePlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, s := range p.Steps {
		got = append(got, s.Sessions)
	}
	if want := []int{4, 8, 16, 12, 10, 9}; !slices.Equal(got, want) {
		t.Errorf("adaptive plan's steps %v, want the longest path %v", got, want)
	}
	sweepOf := func(p Plan) PlanPhase {
		for _, ph := range p.Phases {
			if ph.Name == PhaseSweep {
				return ph
			}
		}
		t.Fatal("no sweep phase")
		return PlanPhase{}
	}
	stepMin := (cfg.Sweep.WarmupS + cfg.Sweep.StepS) / 60
	if got, want := sweepOf(p).Minutes, 8*stepMin; math.Abs(got-want) > 1e-9 {
		t.Errorf("adaptive sweep %.1f minutes, want 6 steps and 2 repeats, %.1f", got, want)
	}
	if got, want := sweepOf(ladder).Minutes, 7*stepMin; math.Abs(got-want) > 1e-9 {
		t.Errorf("ladder sweep %.1f minutes, want 5 steps and 2 repeats, %.1f", got, want)
	}
	if what := sweepOf(p).What; !strings.Contains(what, "adaptive: 4 sessions first, doubling up to 20") || !strings.Contains(what, "at most 6 steps") {
		t.Errorf("adaptive sweep described as %q", what)
	}
	if p.Minutes <= ladder.Minutes {
		t.Errorf("adaptive worst case %.0f minutes, want more than the ladder's %.0f", p.Minutes, ladder.Minutes)
	}
}

// TestPlanNamesStepsWithoutATier: at 0.9/0.1, 4 sessions give the light
// tier no lane, so that step replays heavy sessions alone; plan said
// nothing.
func TestPlanNamesStepsWithoutATier(t *testing.T) {
	cfg := config.Default()
	cfg.Sweep.Ladder, cfg.Workload.Mix.Heavy, cfg.Workload.Mix.Light = []int{4, 8, 12}, 0.9, 0.1
	p, err := MakePlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, "4 sessions give the light tier no lane") }) {
		t.Errorf("notes %q: want 4 sessions named as giving the light tier no lane", p.Notes)
	}
	cfg.Workload.Mix.Heavy, cfg.Workload.Mix.Light = 0.5, 0.5
	if p, _ = MakePlan(cfg); slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, "no lane") }) {
		t.Errorf("half and half at 4, 8, 12: notes %q, want none of a tier without a lane", p.Notes)
	}
}
