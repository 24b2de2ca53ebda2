package rig

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// shortRun is the default run cut to two steps either side of the
// default recipe's capacity (about 8.5 sessions), no repeats. Steps are
// 8 minutes: 4 windows of 4 sessions are too few for either clock to decide
// (with the few blocks and sessions widening the interval, the virtual run's
// TTFT read [0.1, 15] s around 1.5 s), and a too close against a pass says
// nothing about the clocks.
func shortRun(t *testing.T, scale config.Scale) config.Run {
	t.Helper()
	cfg := config.Default()
	cfg.TimeScale = scale
	cfg.Sweep.Ladder, cfg.Sweep.Target, cfg.Sweep.Stress = []int{4, 16}, 4, 0
	cfg.Sweep.WarmupS, cfg.Sweep.StepS, cfg.Workload.PrimeTimeoutS = 240, 480, 240
	f := false
	cfg.Sweep.Repeat = &f
	cfg.Evals.Suites, cfg.Evals.UnderLoadShare = nil, 0
	cfg.Workload.SynthSessions = 40
	cfg.Output = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func mustRun(t *testing.T, cfg config.Run) (report.Summary, time.Duration) {
	t.Helper()
	wall := time.Now()
	sum, err := Run(context.Background(), Options{Config: cfg})
	if err != nil {
		t.Fatalf("run at time scale %s: %v", cfg.TimeScale, err)
	}
	return sum, time.Since(wall)
}

// The same run file on the virtual clock and on a scaled wall clock never
// contradict each other: no step passes on one clock and fails on the other,
// and each step's P90s lie within overlapping intervals. A step may read too
// close on one clock and decide on the other: too close is an abstention,
// not a disagreement. The wall clock's 4-session step read TTFT
// [0.55, 8.8] s in one CI run and [0.57, 8.2] s at load 1.5, both too close,
// against the virtual [0.83, 2.7] s pass, yet passed at load 19: some wall
// windows run slow for a reason not yet found (not simply host load). Both
// clocks must still decide the 16-session step, which is far past the bar
// on either. Its values need not agree: past the bar the queue grows
// through the step, and how far it grows on the wall clock depends on the
// host's own time, scaled x100 (a CI run read 16-session interactivity
// [3.33, 5] tok/s virtual against [6.67, 10] wall, TTFT 38 s against 68 s,
// both far past the bar). So intervals must overlap on a step either clock
// did not fail, and on a step both failed no part may pass on one clock and
// fail on the other.
func TestVirtualAndWallClockAgree(t *testing.T) {
	virt, vtook := mustRun(t, shortRun(t, config.Virtual))
	wall, wtook := mustRun(t, shortRun(t, wallScale))
	t.Logf("virtual %v, wall clock at x%d %v", vtook, wallScale, wtook)
	vs, ws := ladderSteps(t, "virtual", virt), ladderSteps(t, "wall clock", wall)
	for i := range vs {
		v, w := vs[i], ws[i]
		t.Logf("%d sessions: virtual %s, wall %s", v.Sessions, v.Verdict, w.Verdict)
		if contradict(v.Verdict, w.Verdict) {
			t.Errorf("%d sessions: virtual %s, wall clock %s", v.Sessions, v.Verdict, w.Verdict)
		}
		if v.Sessions == 16 && (v.Verdict != verdict.Fail || w.Verdict != verdict.Fail) {
			t.Errorf("16 sessions: virtual %s, wall clock %s; want fail on both (far past the bar)", v.Verdict, w.Verdict)
		}
		for _, vp := range v.Parts {
			for _, wp := range w.Parts {
				if vp.Name != wp.Name || vp.Name == "errors" {
					continue
				}
				t.Logf("  %s: virtual %s %.3g [%.3g, %.3g], wall %s %.3g [%.3g, %.3g]", vp.Name, vp.Verdict, vp.Value.Center, vp.Value.Lo, vp.Value.Hi, wp.Verdict, wp.Value.Center, wp.Value.Lo, wp.Value.Hi)
				if contradict(vp.Verdict, wp.Verdict) {
					t.Errorf("%d sessions %s: virtual %s, wall clock %s", v.Sessions, vp.Name, vp.Verdict, wp.Verdict)
				}
				bothFailed := v.Verdict == verdict.Fail && w.Verdict == verdict.Fail
				if !bothFailed && (vp.Value.Hi < wp.Value.Lo || wp.Value.Hi < vp.Value.Lo) {
					t.Errorf("%d sessions %s: virtual [%.3g, %.3g] and wall [%.3g, %.3g] do not overlap", v.Sessions, vp.Name, vp.Value.Lo, vp.Value.Hi, wp.Value.Lo, wp.Value.Hi)
				}
			}
		}
	}
}

// ladderSteps returns a run's 4- and 16-session steps. A run whose 4-session
// step read too close has no step that passed, so it also steps down below
// 4 (sweep's step-down rule; CI saw the wall clock do so): such steps are
// allowed, any other step is not.
func ladderSteps(t *testing.T, clock string, sum report.Summary) []report.Step {
	t.Helper()
	var on []report.Step
	// the sweep steps down when no step of the ladder passed; the step
	// below may itself pass (CI: 4 sessions too close on the wall clock,
	// then 3 passed, and the test failed on that pass)
	passed := false
	for _, s := range sum.Steps {
		passed = passed || (s.Verdict == verdict.Pass && s.Sessions >= 4)
	}
	for _, s := range sum.Steps {
		switch {
		case s.Sessions == 4 || s.Sessions == 16:
			on = append(on, s)
		case s.Sessions < 4 && !passed:
			t.Logf("%s stepped down to %d sessions (%s): no step passed", clock, s.Sessions, s.Verdict)
		default:
			t.Errorf("%s ran a %d-session step; want the ladder's 4 and 16, and steps below 4 only when none passed", clock, s.Sessions)
		}
	}
	if len(on) != 2 || on[0].Sessions != 4 || on[1].Sessions != 16 {
		t.Fatalf("%s ran %d steps of the ladder 4, 16; want both, in order", clock, len(on))
	}
	return on
}

// contradict reports whether two verdicts on one step say opposite things:
// one passes and the other fails.
func contradict(a, b verdict.Verdict) bool {
	return (a == verdict.Pass && b == verdict.Fail) || (a == verdict.Fail && b == verdict.Pass)
}

// A virtual run is deterministic: the same file and seed give the same
// steps, to the last digit, however busy the host is.
func TestVirtualRunIsDeterministic(t *testing.T) {
	cfg := shortRun(t, config.Virtual)
	cfg.Sweep.Ladder, cfg.Sweep.StepS = []int{6}, 120
	cfg.Sweep.Target = 6
	a, _ := mustRun(t, cfg)
	cfg.Output = t.TempDir()
	b, _ := mustRun(t, cfg)
	ja, _ := json.Marshal(a.Steps)
	jb, _ := json.Marshal(b.Steps)
	if string(ja) != string(jb) {
		t.Errorf("two virtual runs of one file differ:\n%s\n%s", ja, jb)
	}
	if len(a.Steps) != 1 || a.Steps[0].Windows == 0 {
		t.Errorf("steps %s: want one judged step with windows", ja)
	}
}

// sweep.mixes sweeps light-only and heavy-only ladders beside today's in
// the same run, each with its capacity, its run directory under mixes/.
func TestMixesSweptInOneRun(t *testing.T) {
	cfg := shortRun(t, config.Virtual)
	cfg.Sweep.Ladder, cfg.Sweep.StepS = []int{4, 24}, 120
	cfg.Sweep.Mixes = []string{"today", "light", "heavy"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sum, _ := mustRun(t, cfg)
	if len(sum.Mixes) != 2 || sum.Mixes[0].Name != "light" || sum.Mixes[1].Name != "heavy" {
		t.Fatalf("mixes %+v, want light then heavy", sum.Mixes)
	}
	for _, m := range sum.Mixes {
		t.Logf("%s: %d steps, capacity %s", m.Label(), len(m.Steps), m.Capacity.String())
		if len(m.Steps) == 0 || m.Capacity.LimitedBy == "" {
			t.Errorf("%s: %d steps, capacity %+v: want a swept ladder with a capacity", m.Name, len(m.Steps), m.Capacity)
		}
	}
	if sum.Mixes[0].Mix != (report.Mix{Light: 1}) || sum.Mixes[1].Mix != (report.Mix{Heavy: 1}) {
		t.Errorf("mix shares %+v %+v", sum.Mixes[0].Mix, sum.Mixes[1].Mix)
	}
	bad := cfg
	bad.Sweep.Mixes = []string{"today", "medium"}
	if err := bad.Validate(); err == nil {
		t.Error("sweep.mixes with an unknown mix validated")
	}
}
