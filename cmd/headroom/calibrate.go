package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/headroom-bench/headroom/internal/calibrate"
	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/spf13/cobra"
)

// predictScale is the clock predictions run on by default: the virtual
// clock, so a prediction takes as long as its computation and no verdict
// depends on how busy the host is.
const predictScale = "virtual"

// predictRunner is how calibrate re-runs a recipe against the simulator:
// on the clock scale, as a run file spells time_scale.
func predictRunner(scale string) calibrate.Runner {
	return func(ctx context.Context, cfg config.Run) (report.Summary, error) {
		if err := calibrate.SetClock(&cfg, scale); err != nil {
			return report.Summary{}, fmt.Errorf("--time-scale: %w", err)
		}
		return rig.Run(ctx, rig.Options{Config: cfg, Version: fullVersion()})
	}
}

func calibrateCmd() *cobra.Command {
	var (
		out, output string
		noPredict   bool
		scale       string
	)
	cmd := &cobra.Command{
		Use:   "calibrate RUN_DIR...",
		Short: "Fit a simulator profile to real run directories, and show how well it predicts them",
		Long: `calibrate fits the simulated engine's profile to what real runs measured:
the prefill rate and its attention cost, the fixed cost of an iteration
(the scheduler and the weights) and its cost per token of context, from the
records of every request (each token after the first is one iteration; the
work in it is rebuilt from every request in flight); the KV cache capacity
from the server's KV-usage gauge against the tokens the requests in flight
held; the cache block from the cached-token counts. Engine limits the
recipe's args set (--max-num-seqs, --max-num-batched-tokens, --block-size,
--max-model-len, or SGLang's) are read from them; the context from what the
server said it serves. Terms for engines unlike the simulator's are fitted
where the runs show them: a fixed wait per request and per prompt token
beside the batch with a slow-down as requests run against max_num_seqs
(kept only when it accounts for the runs far better than prefill in the
batch), the answers' lengths against max_tokens, whether the engine's TTFT
counts queue time, and whether it has a prefix cache. Every field's value,
error, source and what pinned it (the runs, the recipe, a bound, or
nothing: the prior) is printed and written as a comment in the profile.

The runs must be of one engine copy serving one model on one engine. The
profile is written to -o; point recipe.sim.profile at it.

Then each run's recipe is run again against the fitted profile (same
workload, bar, sweep and seeds, no deploy, no evals) and its steps are
printed beside the measured ones: P90 TTFT, P90 interactivity and the
cache hit rate with the error of each, the verdicts, and the capacity with
its error in ladder steps. The predictions run on the virtual clock
(--time-scale virtual: seconds for a two-hour run file, the same on any
host); a number runs them on the scaled wall clock instead. --no-predict
skips them.

docs/simulator.md ("Calibration") explains the loop: simulate broadly,
verify the shortlist on GPUs, calibrate from what was measured.`,
		Example: `  headroom sim calibrate runs/recipe-0/20261201T090000Z -o recipe-0.yaml
  headroom sim calibrate runs/recipe-0/* -o recipe-0.yaml --no-predict
  headroom run --set recipe.sim.profile=recipe-0.yaml    # a simulated run on the fitted engine`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			var runs []calibrate.Run
			for _, dir := range args {
				r, err := calibrate.Load(dir)
				if err != nil {
					return err
				}
				for _, w := range r.Warnings {
					fmt.Fprintln(stderr, "warning:", w)
				}
				runs = append(runs, r)
			}
			if !noPredict {
				// say now, not after the fit, that the clock is wrong
				probe, err := calibrate.PredictConfig(runs[0], out, "vllm", output)
				if err == nil {
					err = calibrate.SetClock(&probe, scale)
				}
				if err != nil {
					return fmt.Errorf("--time-scale: %w", err)
				}
			}
			fit, err := calibrate.FitProfile(runs)
			if err != nil {
				return err
			}
			b, err := fit.ProfileYAML(args)
			if err != nil {
				return fmt.Errorf("calibrate: %w", err)
			}
			if err := os.WriteFile(out, b, 0o644); err != nil {
				return fmt.Errorf("-o %s: %w", out, err)
			}
			if err := writeFit(stdout, fit); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "profile written to %s\n", out)
			if noPredict {
				return nil
			}
			for _, r := range runs {
				cfg, err := calibrate.PredictConfig(r, out, fit.Personality, output)
				if err != nil {
					return err
				}
				fmt.Fprintf(stderr, "predicting %s at time scale %s ...\n", r.Dir, scale)
				c, err := calibrate.Predict(cmd.Context(), r, cfg, predictRunner(scale))
				if err != nil {
					return err
				}
				fmt.Fprintln(stdout)
				if err := c.WriteText(stdout); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "profile.yaml", "profile file to write")
	cmd.Flags().StringVar(&output, "output", "runs", "folder for the predicted runs' directories (runs/<recipe>-predicted/<timestamp>)")
	cmd.Flags().BoolVar(&noPredict, "no-predict", false, "fit and write the profile only; do not re-run the recipes")
	cmd.Flags().StringVar(&scale, "time-scale", predictScale, "the predictions' clock, as time_scale is written: virtual, or modelled seconds per wall second (up to 1000)")
	return cmd
}

// pinnedBy says in a word what pinned a fitted field's value.
func pinnedBy(status string) string {
	switch status {
	case calibrate.Fitted:
		return "the runs"
	case calibrate.Given:
		return "the recipe"
	case calibrate.Bound:
		return "a bound"
	}
	return "prior"
}

// writeFit prints the fitted fields, their errors and sources, and the notes.
func writeFit(w io.Writer, f calibrate.Fit) error {
	fmt.Fprintf(w, "fitted profile %s (%s scheduler; %d decode and %d prefill windows, %.2g s per iteration off on average)\n",
		f.Profile.Name, f.Personality, f.DecodeWindows, f.PrefillWindows, f.RMS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "field\tvalue\tstd err\tpinned by\tfrom\t")
	for _, p := range f.Params {
		se := "-"
		if p.SE > 0 {
			se = fmt.Sprintf("%.2g", p.SE)
		}
		fmt.Fprintf(tw, "%s\t%.4g\t%s\t%s\t%s\t\n", p.Field, p.Value, se, pinnedBy(p.Status), p.Source)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range f.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}
