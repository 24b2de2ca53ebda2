package study

import (
	"context"
	"io"
	"sync"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// TestCompareSweepsHoldsFixedSteps (issue 21.5): the study runs each run
// file as the linear ladder with steps that run until decided, in adaptive
// mode, and as the linear ladder with every step held to its minimum length
// (max_step_s = step_s), and counts each one's undecided steps.
func TestCompareSweepsHoldsFixedSteps(t *testing.T) {
	base := config.Default()
	var mu sync.Mutex
	var seen []config.Run
	run := func(_ context.Context, cfg config.Run) (report.Summary, error) {
		mu.Lock()
		seen = append(seen, cfg)
		mu.Unlock()
		steps := []report.Step{{Sessions: 4, Verdict: verdict.Pass, StartS: 0, EndS: 600}, {Sessions: 8, Verdict: verdict.TooClose, StartS: 600, EndS: 1200}}
		if cfg.Sweep.MaxStepS > cfg.Sweep.StepS {
			steps[1].EndS = 1800 // extended
		}
		return report.Summary{Steps: steps}, nil
	}
	res, err := CompareSweeps(context.Background(), []config.Run{base}, 2, run, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 || len(res) != 1 {
		t.Fatalf("%d runs, %d results; want 3 runs of one run file", len(seen), len(res))
	}
	fixed, extended := 0, 0
	for _, c := range seen {
		switch {
		case c.Sweep.Mode == "adaptive":
		case c.Sweep.MaxStepS == c.Sweep.StepS:
			fixed++
		default:
			extended++
		}
	}
	if fixed != 1 || extended != 1 {
		t.Errorf("%d fixed-step and %d extended-step ladders, want one of each", fixed, extended)
	}
	gpus := float64(base.Recipe.Nodes * base.Recipe.GPUsPerNode)
	if s := res[0]; s.Fixed.GPUMinutes != 20*gpus || s.Linear.GPUMinutes != 30*gpus || s.Fixed.TooClose != 1 {
		t.Errorf("fixed %+v, linear %+v: want 20 and 30 minutes on %g GPUs, one step too close", s.Fixed, s.Linear, gpus)
	}
}
