package rig

import (
	"math"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/stats"
)

// TestPlanGivesStepLengthMinutes: `headroom plan` gives the expected and
// the worst-case GPU minutes of steps that run until they are decided. With
// 60 s steps too short to prove errors under 2%, the expected run is longer
// than the fixed one and the worst case runs every step and repeat to
// max_step_s; with max_step_s = step_s all three agree; the worst case
// never passes the sweep's share of the window.
func TestPlanGivesStepLengthMinutes(t *testing.T) {
	short := func(maxStep, window float64) Plan {
		cfg := config.Default()
		cfg.Sweep.StepS, cfg.Sweep.MaxStepS, cfg.Sweep.WindowS, cfg.Sweep.WarmupS = 60, maxStep, 15, 30
		cfg.Sweep.GPUWindowMin = window
		p, err := MakePlan(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := short(300, 120)
	sl := p.StepLength
	n := sl.TurnsForErrors
	if _, hi := stats.Wilson(0, n, 0.95); hi >= 0.02 {
		t.Errorf("0 errors in %d turns: Wilson upper %.4f, not under the 2%% bar", n, hi)
	}
	if _, hi := stats.Wilson(0, n-1, 0.95); hi < 0.02 {
		t.Errorf("0 errors in %d turns already clear 2%%: %d is not the fewest", n-1, n)
	}
	if !(sl.ExpectedMinutes > p.Minutes && sl.ExpectedMinutes < sl.WorstMinutes) {
		t.Errorf("expected %g minutes, fixed %g, worst %g: want fixed < expected < worst", sl.ExpectedMinutes, p.Minutes, sl.WorstMinutes)
	}
	// 5 steps and 2 repeats, each 240 s past its 60 s
	if want := p.Minutes + 7*4; math.Abs(sl.WorstMinutes-want) > 1e-9 {
		t.Errorf("worst case %g minutes, want %g", sl.WorstMinutes, want)
	}
	if sl.WorstGPUMinutes != sl.WorstMinutes*float64(p.GPUs) || sl.ExpectedGPUMinutes != sl.ExpectedMinutes*float64(p.GPUs) {
		t.Errorf("GPU minutes %+v are not minutes x %d GPUs", sl, p.GPUs)
	}
	var text strings.Builder
	if err := p.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "steps that run until decided (up to 300s each") {
		t.Errorf("the plan does not print the step-length minutes:\n%s", text.String())
	}
	if f := short(60, 120).StepLength; f.ExpectedMinutes != p.Minutes || f.WorstMinutes != p.Minutes {
		t.Errorf("fixed steps: expected %g, worst %g, want both the plan's %g", f.ExpectedMinutes, f.WorstMinutes, p.Minutes)
	}
	// a window with 2 minutes to spare after the fixed run, pre-flight,
	// drain and rollback allowances: no more than 2 minutes are added
	tight := short(300, 120)
	room := short(300, tight.Minutes+2).StepLength
	if room.WorstMinutes > tight.Minutes+2+1e-9 {
		t.Errorf("worst case %g minutes in a %g-minute window", room.WorstMinutes, tight.Minutes+2)
	}
}
