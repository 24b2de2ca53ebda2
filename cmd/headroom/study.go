package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/study"
	"github.com/spf13/cobra"
)

func studyCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "study",
		Short: "Measure the method on the virtual clock: interval coverage, and GPU minutes the adaptive sweep saves",
	}
	var (
		files                 []string
		runs, truthRuns, fine int
		repeatSessions        string
		sets                  []string
		workers               int
		firstSeed             uint64
		asJSON                bool
		out                   string
	)
	// inputs are the run files (the default run without -f) and the
	// directory the study's runs go to (a fresh temporary one without -o)
	inputs := func() ([]config.Run, string, error) {
		var ovs []config.Override
		for _, arg := range sets {
			o, err := config.ParseSet(arg)
			if err != nil {
				return nil, "", err
			}
			ovs = append(ovs, o)
		}
		var cfgs []config.Run
		if len(files) == 0 {
			cfg, err := config.DefaultWith(ovs...)
			if err != nil {
				return nil, "", err
			}
			cfgs = append(cfgs, cfg)
		}
		for _, f := range files {
			cfg, err := config.LoadWith(f, ovs...)
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
		Short: "How often step and capacity intervals cover a truth pooled from many independent runs, and how often steps read pass or fail against it",
		Long: `coverage runs each run file --runs times on the virtual clock, each with its
own workload and sweep seed (1000, 1001, ..., or from --first-seed), exactly as simulate does. It
then measures the truth, which no estimator under study defines: at every
session count the runs stepped at, --truth-runs further runs (seeds of their
own, no repeat, no kill switch) climb the run file's ladder to that count, as
the runs reach it, and the judged windows of all their steps there are
pooled into one histogram per signal, whose P90 TTFT and interactivity are
the truth; then the same on a fine grid (at most --fine levels) between the
last level whose truth held the bar and the first that did not. A level no
climb reached (a step below it missed in every one) is measured by runs that
start cold at it. The true capacity is where the pooled truth crosses the
bar, interpolated between those two levels on the worst part's margin.

It reports, each with its 95% Wilson interval: how often the runs' capacity
intervals hold the true capacity; how often each step's TTFT and
interactivity intervals hold the truth at its level; the false-pass rate
(steps whose truth is beyond the bar that read pass) and the false-fail rate
(steps whose truth is within that read fail), a step reading the worst of
its ttft, interactivity and errors parts. It also gives each interval's mean
half-width against the spread of its estimate between runs (calibrated: 1.96
standard deviations; a ratio near 1 is calibrated, well above 1 covers by
being wide) and the GPU minutes each sweep spent.`,
		Example: `  headroom sim study coverage --runs 20 --truth-runs 20
  headroom sim study coverage --runs 60 --first-seed 5000 --json
  headroom sim study coverage -f examples/reference/0-vllm.yaml --runs 20 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ro rig.Options
			switch repeatSessions {
			case "fresh":
			case "same":
				ro.RepeatSameSessions = true
			default:
				return fmt.Errorf("--repeat-sessions %q: want fresh (a repeat replays sessions synthesised from a fresh seed, as runs do) or same (fresh plays of the sessions the run first drew)", repeatSessions)
			}
			cfgs, d, err := inputs()
			if err != nil {
				return err
			}
			var all []study.Coverage
			for _, cfg := range cfgs {
				o := study.Options{Runs: runs, TruthRuns: truthRuns, Fine: fine, Workers: workers, FirstSeed: firstSeed}
				c, err := study.MeasureCoverage(cmd.Context(), cfg, o, study.VirtualWith(d, ro), stderr)
				if err != nil {
					return err
				}
				if len(sets) > 0 {
					c.Recipe += " (" + strings.Join(sets, ", ") + ")"
				}
				all = append(all, c)
			}
			if asJSON {
				return writeJSON(stdout, all)
			}
			return study.WriteCoverage(stdout, all)
		},
	}
	coverage.Flags().IntVar(&runs, "runs", 20, "runs per run file, each with its own seed")
	coverage.Flags().IntVar(&truthRuns, "truth-runs", 20, "further runs pooled into the truth at each level")
	coverage.Flags().Uint64Var(&firstSeed, "first-seed", 1000, "the first run's workload and sweep seed (the runs take it and those after it); another measures a rule on runs it was not chosen from")
	coverage.Flags().IntVar(&fine, "fine", 6, "the most levels of the fine grid near the crossing")
	coverage.Flags().StringVar(&repeatSessions, "repeat-sessions", "fresh", "what a run's repeats replay: fresh (sessions synthesised from a fresh seed, as runs do) or same (fresh plays of the sessions the run first drew), to compare the two")
	sweeps := &cobra.Command{
		Use:   "sweeps",
		Short: "GPU minutes and interval width of the linear ladder, with steps until decided and fixed, and of the adaptive sweep",
		Long: `sweeps runs each run file three times on the virtual clock: as a linear
ladder of every sweep.resolution-th session count from its ladder's first
step to its last, with steps that run until decided (up to
sweep.max_step_s, today's rule); the same ladder with every step held to
sweep.step_s (max_step_s = step_s, as steps ran before they extended); and
in adaptive mode over the same range at the same resolution (all bracket
the crossing as finely). It prints the modelled GPU minutes each spent,
warm-up included, the steps that stayed too close, and the capacity and
the width of its interval.`,
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
			fmt.Fprintln(stdout, "| recipe | GPUs | range | linear, steps until decided: steps (too close), GPU-min, capacity, width | linear, fixed steps: steps (too close), GPU-min, capacity, width | adaptive: steps (too close), GPU-min, capacity, width | adaptive saved |")
			fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|")
			arm := func(c study.SweepCost) string {
				return fmt.Sprintf("%d (%d), %.0f, %s, %.2f", c.Steps, c.TooClose, c.GPUMinutes, capText(c), c.Width)
			}
			for _, s := range res {
				fmt.Fprintf(stdout, "| %s | %d | %d-%d | %s | %s | %s | %.0f%% |\n", s.Recipe, s.GPUs, s.Ladder[0], s.Ladder[len(s.Ladder)-1],
					arm(s.Linear), arm(s.Fixed), arm(s.Adaptive), 100*s.Saved())
			}
			return nil
		},
	}
	for _, c := range []*cobra.Command{coverage, sweeps} {
		c.Flags().StringArrayVarP(&files, "file", "f", nil, "a run file on endpoint sim (repeatable; default: the built-in default run)")
		c.Flags().StringArrayVar(&sets, "set", nil, "set a field of every run file (the default run's without -f), `PATH=VALUE` as simulate --set does; repeatable")
		c.Flags().IntVar(&workers, "workers", runtime.GOMAXPROCS(0), "runs at once (each on its own virtual clock)")
		c.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON")
		c.Flags().StringVar(&out, "output", "", "folder for the runs' directories (default: a temporary folder)")
	}
	cmd.AddCommand(coverage, sweeps, transferCmd(stdout, stderr))
	return cmd
}

func capText(c study.SweepCost) string {
	return strings.ReplaceAll(c.Capacity.String(), "sessions ", "")
}
