package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/study"
	"github.com/spf13/cobra"
)

func studyCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "study",
		Short: "Measure the method on the virtual clock: interval coverage, and GPU minutes the adaptive sweep saves",
	}
	var (
		files         []string
		seeds, longer int
		workers       int
		asJSON        bool
		out           string
	)
	// inputs are the run files (the default run without -f) and the
	// directory the study's runs go to (a fresh temporary one without -o)
	inputs := func() ([]config.Run, string, error) {
		cfgs := []config.Run{config.Default()}
		if len(files) > 0 {
			cfgs = nil
		}
		for _, f := range files {
			cfg, err := config.Load(f)
			if err != nil {
				return nil, "", err
			}
			if cfg.Recipe.Endpoint != config.SimEndpoint {
				return nil, "", fmt.Errorf("%s: recipe.endpoint is %s: a study runs on the built-in simulator (endpoint: sim)", f, cfg.Recipe.Endpoint)
			}
			cfgs = append(cfgs, cfg)
		}
		if out != "" {
			return cfgs, out, nil
		}
		d, err := os.MkdirTemp("", "headroom-study-")
		return cfgs, d, err
	}
	coverage := &cobra.Command{
		Use:   "coverage",
		Short: "How often capacity intervals cover the long-run capacity, over repeated runs with different seeds",
		Long: `coverage runs each run file --seeds times on the virtual clock, each with its
own traffic and bootstrap seed, then once more with steps --longer times as
long on a ladder of every session count around the capacities found (the
long-run capacity), and counts the runs whose 95% capacity interval contains
it. A method whose intervals are honest covers about 95% of the time; much
less means the intervals are too narrow.`,
		Example: `  headroom sim study coverage --seeds 20
  headroom sim study coverage -f examples/reference/0-vllm.yaml --seeds 20 --longer 4 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfgs, d, err := inputs()
			if err != nil {
				return err
			}
			var all []study.Coverage
			for _, cfg := range cfgs {
				c, err := study.MeasureCoverage(cmd.Context(), cfg, seeds, longer, workers, study.Virtual(d), stderr)
				if err != nil {
					return err
				}
				all = append(all, c)
			}
			if asJSON {
				return writeJSON(stdout, all)
			}
			fmt.Fprintln(stdout, "| recipe | runs | covered | above | below | coverage | mean interval width | long-run capacity (steps x longer) | wall |")
			fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|---|---|")
			for _, c := range all {
				fmt.Fprintf(stdout, "| %s | %d | %d | %d | %d | %.0f%% | %.2f sessions | %s (x%d) | %.0f s |\n", c.Recipe, len(c.Runs), c.Covered, c.Above, c.Below, 100*c.Rate(), c.MeanWidth, c.LongRun.String(), c.Longer, c.WallS)
			}
			return nil
		},
	}
	coverage.Flags().IntVar(&seeds, "seeds", 20, "runs per run file, each with its own seed")
	coverage.Flags().IntVar(&longer, "longer", 4, "the long run's steps are this many times as long")
	sweeps := &cobra.Command{
		Use:   "sweeps",
		Short: "GPU minutes of the linear ladder against the adaptive sweep, at the same resolution",
		Long: `sweeps runs each run file twice on the virtual clock: as a linear ladder of
every sweep.resolution-th session count from its ladder's first step to its
last, and in adaptive mode over the same range at the same resolution (both
bracket the crossing as finely), and prints the modelled GPU minutes each
spent, warm-up included, with the capacity and interval each found.`,
		Example: `  headroom sim study sweeps -f examples/reference/0-vllm.yaml -f examples/reference/3-vllm-x2.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfgs, d, err := inputs()
			if err != nil {
				return err
			}
			res, err := study.CompareSweeps(cmd.Context(), cfgs, workers, study.Virtual(d), stderr)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, res)
			}
			fmt.Fprintln(stdout, "| recipe | GPUs | range | linear: steps, GPU-min, capacity | adaptive: steps, GPU-min, capacity | saved |")
			fmt.Fprintln(stdout, "|---|---|---|---|---|---|")
			for _, s := range res {
				fmt.Fprintf(stdout, "| %s | %d | %d-%d | %d, %.0f, %s | %d, %.0f, %s | %.0f%% |\n", s.Recipe, s.GPUs, s.Ladder[0], s.Ladder[len(s.Ladder)-1],
					s.Linear.Steps, s.Linear.GPUMinutes, capText(s.Linear), s.Adaptive.Steps, s.Adaptive.GPUMinutes, capText(s.Adaptive), 100*s.Saved())
			}
			return nil
		},
	}
	for _, c := range []*cobra.Command{coverage, sweeps} {
		c.Flags().StringArrayVarP(&files, "file", "f", nil, "a run file on endpoint sim (repeatable; default: the built-in default run)")
		c.Flags().IntVar(&workers, "workers", runtime.GOMAXPROCS(0), "runs at once (each on its own virtual clock)")
		c.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON")
		c.Flags().StringVar(&out, "output", "", "folder for the runs' directories (default: a temporary folder)")
	}
	cmd.AddCommand(coverage, sweeps)
	return cmd
}

func capText(c study.SweepCost) string {
	return strings.ReplaceAll(c.Capacity.String(), "sessions ", "")
}
