// Package study runs repeated simulated runs on the virtual clock to
// measure the method itself: how often step and capacity intervals cover a
// truth pooled from many independent runs, how often steps read pass or
// fail against that truth, and how many GPU minutes the adaptive sweep
// saves over the linear ladder.
package study

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sync"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// RunFunc carries out one run and returns its summary.
type RunFunc func(ctx context.Context, cfg config.Run) (report.Summary, error)

// Virtual runs each config on the virtual clock, quietly, writing its run
// directory under dir.
func Virtual(dir string) RunFunc { return VirtualWith(dir, rig.Options{}) }

// VirtualWith is Virtual with further rig options (Config is set per run).
func VirtualWith(dir string, o rig.Options) RunFunc {
	return func(ctx context.Context, cfg config.Run) (report.Summary, error) {
		cfg.TimeScale = config.Virtual
		cfg.Output = dir
		if err := cfg.Validate(); err != nil {
			return report.Summary{}, err
		}
		o := o
		o.Config = cfg
		sum, err := rig.Run(ctx, o)
		if err != nil && len(sum.Steps) == 0 {
			return sum, err
		}
		// a run that judged steps and then missed its target (or was cut
		// off by the kill switch) still measured a capacity
		return sum, nil
	}
}

// Sweeps compares the linear ladder with the adaptive sweep on one recipe,
// both bracketing the crossing to the same resolution, and the linear
// ladder whose steps run until decided (today's) with the same ladder's
// steps held to their minimum length (sweep.max_step_s = sweep.step_s, as
// every step ran before steps extended).
type Sweeps struct {
	Recipe   string         `json:"recipe"`
	GPUs     int            `json:"gpus"`
	Ladder   []int          `json:"ladder"`
	Linear   SweepCost      `json:"linear"`
	Adaptive SweepCost      `json:"adaptive"`
	Fixed    SweepCost      `json:"fixed"`
	Note     string         `json:"note,omitempty"`
	Capacity sweep.Capacity `json:"-"`
}

// SweepCost is what one mode spent and found.
type SweepCost struct {
	Steps      int            `json:"steps"`
	GPUMinutes float64        `json:"gpu_minutes"`
	Capacity   sweep.Capacity `json:"capacity"`
	Width      float64        `json:"width"`
	// TooClose is how many steps read too close: the undecided ones.
	TooClose int `json:"too_close"`
}

// Saved is the share of the linear ladder's GPU minutes the adaptive sweep
// did not spend.
func (s Sweeps) Saved() float64 {
	if s.Linear.GPUMinutes <= 0 {
		return math.NaN()
	}
	return 1 - s.Adaptive.GPUMinutes/s.Linear.GPUMinutes
}

// CompareSweeps runs each base three times: as a linear ladder of every
// resolution-th session count from its ladder's first step to its last, in
// adaptive mode over the same range at the same resolution, and as the
// linear ladder again with every step held to its minimum length.
func CompareSweeps(ctx context.Context, bases []config.Run, workers int, run RunFunc, progress io.Writer) ([]Sweeps, error) {
	out := make([]Sweeps, len(bases))
	var mu sync.Mutex // the arms of one base fill the same Sweeps
	err := rig.Parallel(ctx, 3*len(bases), workers, func(ctx context.Context, k int) error {
		i, arm := k/3, k%3
		adaptive, fixed := arm == 1, arm == 2
		cfg := bases[i]
		first, last := cfg.Sweep.Ladder[0], cfg.Sweep.Ladder[len(cfg.Sweep.Ladder)-1]
		res := max(1, cfg.Sweep.Resolution)
		var ladder []int
		for n := first; n <= last; n += res {
			ladder = append(ladder, n)
		}
		cfg.Sweep.Ladder, cfg.Sweep.Resolution = ladder, res
		cfg.Sweep.Target, cfg.Sweep.Stress = ladder[0], 0
		cfg.Sweep.Mode = "ladder"
		mode := cfg.Sweep.Mode
		switch {
		case adaptive:
			cfg.Sweep.Mode, mode = "adaptive", "adaptive"
		case fixed:
			cfg.Sweep.MaxStepS, mode = cfg.Sweep.StepS, "ladder, fixed steps"
		}
		sum, err := run(ctx, cfg)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", cfg.Recipe.Name, mode, err)
		}
		c := cost(sum, cfg.Recipe.Nodes*cfg.Recipe.GPUsPerNode)
		fmt.Fprintf(progress, "sweeps %s %s: %d steps (%d too close), %.0f GPU-minutes, capacity %s\n", cfg.Recipe.Name, mode, c.Steps, c.TooClose, c.GPUMinutes, c.Capacity.String())
		mu.Lock()
		defer mu.Unlock()
		out[i].Recipe, out[i].GPUs, out[i].Ladder = cfg.Recipe.Name, cfg.Recipe.Nodes*cfg.Recipe.GPUsPerNode, ladder
		switch {
		case adaptive:
			out[i].Adaptive = c
		case fixed:
			out[i].Fixed = c
		default:
			out[i].Linear = c
		}
		return nil
	})
	return out, err
}

// cost is the modelled GPU minutes from the first step's start to the last
// step's end: warm-ups, ramps and the drains between steps included.
func cost(sum report.Summary, gpus int) SweepCost {
	c := SweepCost{Steps: len(sum.Steps), Capacity: sum.Capacity}
	if n := len(sum.Steps); n > 0 {
		c.GPUMinutes = (sum.Steps[n-1].EndS - sum.Steps[0].StartS) / 60 * float64(gpus)
	}
	c.Width = sum.Capacity.Hi - sum.Capacity.Lo
	for _, st := range sum.Steps {
		if st.Verdict == verdict.TooClose {
			c.TooClose++
		}
	}
	return c
}

// BaseName is a run file's name without its folder and extension.
func BaseName(path string) string {
	b := filepath.Base(path)
	return b[:len(b)-len(filepath.Ext(b))]
}
