// Package study runs repeated simulated runs on the virtual clock to
// measure the method itself: how often capacity intervals cover the
// long-run capacity, and how many GPU minutes the adaptive sweep saves over
// the linear ladder.
package study

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/sweep"
)

// RunFunc carries out one run and returns its summary.
type RunFunc func(ctx context.Context, cfg config.Run) (report.Summary, error)

// Virtual runs each config on the virtual clock, quietly, writing its run
// directory under dir.
func Virtual(dir string) RunFunc {
	return func(ctx context.Context, cfg config.Run) (report.Summary, error) {
		cfg.TimeScale = config.Virtual
		cfg.Output = dir
		if err := cfg.Validate(); err != nil {
			return report.Summary{}, err
		}
		sum, err := rig.Run(ctx, rig.Options{Config: cfg})
		if err != nil && len(sum.Steps) == 0 {
			return sum, err
		}
		// a run that judged steps and then missed its target (or was cut
		// off by the kill switch) still measured a capacity
		return sum, nil
	}
}

// Coverage is how often the capacity intervals of ordinary runs, each with
// its own traffic seed, contain the long-run capacity.
type Coverage struct {
	Recipe string `json:"recipe"`
	// LongRun is the capacity of one run with steps Longer times as long on
	// a ladder of every session count around the crossing: the value the
	// ordinary runs estimate.
	LongRun sweep.Capacity `json:"long_run"`
	Longer  int            `json:"longer"`
	// Runs are the ordinary runs' capacities, in seed order.
	Runs    []sweep.Capacity `json:"runs"`
	Seeds   []uint64         `json:"seeds"`
	Covered int              `json:"covered"`
	// Above and Below count the runs whose interval lies above or below
	// the long-run capacity.
	Above     int     `json:"above"`
	Below     int     `json:"below"`
	MeanWidth float64 `json:"mean_width"`
	WallS     float64 `json:"wall_s"`
}

// Rate is the share of runs whose interval covered the long-run capacity.
func (c Coverage) Rate() float64 {
	if len(c.Runs) == 0 {
		return math.NaN()
	}
	return float64(c.Covered) / float64(len(c.Runs))
}

// MeasureCoverage runs base with seeds 1..n (workload and bootstrap seeds
// both), then the long run, and counts the intervals that cover it.
func MeasureCoverage(ctx context.Context, base config.Run, n, longer, workers int, run RunFunc, progress io.Writer) (Coverage, error) {
	start := time.Now()
	cov := Coverage{Recipe: base.Recipe.Name, Longer: longer, Runs: make([]sweep.Capacity, n), Seeds: make([]uint64, n)}
	err := rig.Parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		cfg := base
		seed := uint64(1000 + i)
		cfg.Workload.Seed, cfg.Sweep.Seed = seed, seed
		sum, err := run(ctx, cfg)
		if err != nil {
			return fmt.Errorf("seed %d: %w", seed, err)
		}
		cov.Runs[i], cov.Seeds[i] = sum.Capacity, seed
		fmt.Fprintf(progress, "coverage %s: seed %d: capacity %s\n", base.Recipe.Name, seed, sum.Capacity.String())
		return nil
	})
	if err != nil {
		return cov, err
	}
	long, err := longRun(ctx, base, cov.Runs, longer, run)
	if err != nil {
		return cov, fmt.Errorf("the long run: %w", err)
	}
	cov.LongRun = long
	fmt.Fprintf(progress, "coverage %s: long run (steps x%d): capacity %s\n", base.Recipe.Name, longer, long.String())
	width := 0.0
	for _, c := range cov.Runs {
		width += c.Hi - c.Lo
		switch {
		case long.Sessions < c.Lo: // the interval lies above it
			cov.Above++
		case long.Sessions > c.Hi: // below it
			cov.Below++
		default:
			cov.Covered++
		}
	}
	cov.MeanWidth = width / float64(n)
	cov.WallS = time.Since(start).Seconds()
	return cov, nil
}

// longRun measures base's capacity with longer steps on a ladder of every
// session count from two below the lowest capacity the runs found to two
// above the highest, with a seed apart from theirs and, for synthesised
// traffic, longer times as many sessions drawn from the same synthesiser.
func longRun(ctx context.Context, base config.Run, runs []sweep.Capacity, longer int, run RunFunc) (sweep.Capacity, error) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range runs {
		if math.IsInf(c.Sessions, 0) || math.IsNaN(c.Sessions) {
			continue
		}
		lo, hi = math.Min(lo, c.Sessions), math.Max(hi, c.Sessions)
	}
	if math.IsInf(lo, 0) {
		return sweep.Capacity{}, fmt.Errorf("no run measured a capacity")
	}
	cfg := base
	cfg.Sweep.Ladder = nil
	for n := max(1, int(math.Floor(lo))-2); n <= int(math.Ceil(hi))+2; n++ {
		cfg.Sweep.Ladder = append(cfg.Sweep.Ladder, n)
	}
	cfg.Sweep.Target, cfg.Sweep.Stress = cfg.Sweep.Ladder[0], 0
	cfg.Sweep.StepS *= float64(longer)
	cfg.Sweep.Mode = "ladder"
	f := false
	cfg.Sweep.Repeat = &f
	cfg.Workload.Seed, cfg.Sweep.Seed = 99, 99
	if cfg.Workload.Traces == "synth" {
		// more of the traffic the runs draw from, not more of one draw
		cfg.Workload.SynthSessions *= longer
	}
	sum, err := run(ctx, cfg)
	if err != nil {
		return sweep.Capacity{}, err
	}
	return sum.Capacity, nil
}

// Sweeps compares the linear ladder with the adaptive sweep on one recipe,
// both bracketing the crossing to the same resolution.
type Sweeps struct {
	Recipe   string         `json:"recipe"`
	GPUs     int            `json:"gpus"`
	Ladder   []int          `json:"ladder"`
	Linear   SweepCost      `json:"linear"`
	Adaptive SweepCost      `json:"adaptive"`
	Note     string         `json:"note,omitempty"`
	Capacity sweep.Capacity `json:"-"`
}

// SweepCost is what one mode spent and found.
type SweepCost struct {
	Steps      int            `json:"steps"`
	GPUMinutes float64        `json:"gpu_minutes"`
	Capacity   sweep.Capacity `json:"capacity"`
	Width      float64        `json:"width"`
}

// Saved is the share of the linear ladder's GPU minutes the adaptive sweep
// did not spend.
func (s Sweeps) Saved() float64 {
	if s.Linear.GPUMinutes <= 0 {
		return math.NaN()
	}
	return 1 - s.Adaptive.GPUMinutes/s.Linear.GPUMinutes
}

// CompareSweeps runs each base twice: as a linear ladder of every
// resolution-th session count from its ladder's first step to its last,
// and in adaptive mode over the same range at the same resolution.
func CompareSweeps(ctx context.Context, bases []config.Run, workers int, run RunFunc, progress io.Writer) ([]Sweeps, error) {
	out := make([]Sweeps, len(bases))
	err := rig.Parallel(ctx, 2*len(bases), workers, func(ctx context.Context, k int) error {
		i, adaptive := k/2, k%2 == 1
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
		if adaptive {
			cfg.Sweep.Mode = "adaptive"
		}
		sum, err := run(ctx, cfg)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", cfg.Recipe.Name, cfg.Sweep.Mode, err)
		}
		c := cost(sum, cfg.Recipe.Nodes*cfg.Recipe.GPUsPerNode)
		fmt.Fprintf(progress, "sweeps %s %s: %d steps, %.0f GPU-minutes, capacity %s\n", cfg.Recipe.Name, cfg.Sweep.Mode, c.Steps, c.GPUMinutes, c.Capacity.String())
		out[i].Recipe, out[i].GPUs, out[i].Ladder = cfg.Recipe.Name, cfg.Recipe.Nodes*cfg.Recipe.GPUsPerNode, ladder
		if adaptive {
			out[i].Adaptive = c
		} else {
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
	return c
}

// BaseName is a run file's name without its folder and extension.
func BaseName(path string) string {
	b := filepath.Base(path)
	return b[:len(b)-len(filepath.Ext(b))]
}
