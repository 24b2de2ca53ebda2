package main

import (
	"errors"
	"io"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/spf13/cobra"
)

func simulateCmd(stdout, stderr io.Writer) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Predict a recipe's capacity on the built-in simulator, on a virtual clock (seconds, no GPU)",
		Long: `simulate runs the whole recipe run of a run file (lanes, subagents, think time,
warm-up, evals, engine, metrics, scrapes, windows, verdicts, capacity, cost,
report) against the built-in simulated gateway on a virtual clock: modelled
time jumps from one event to the next, so a sweep of modelled hours takes
seconds, and the same seed gives the same run however busy the host is. It is
exactly run with time_scale: virtual; the recipe's endpoint must be "sim"
(recipe.sim says the profile, personality, copies, router, host cache and
prefill/decode split to model).

The verdicts, intervals, capacity and cost come from the same code as a real
run's. The numbers are the model's, not a measurement: docs/fidelity.md says
how close it comes to the reference report, and ` + "`headroom sim calibrate`" + ` fits the
model to real runs.

` + exitCodesHelp,
		Example: `  headroom simulate                                  # the built-in default, in seconds
  headroom simulate -f examples/reference/0-vllm.yaml
  headroom simulate -f examples/reference/7-sglang-x2.yaml --json | jq .capacity
  headroom simulate --set workload.mix.heavy=1 --set workload.mix.light=0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.rf.load()
			if err != nil {
				return err
			}
			if cfg.Recipe.Endpoint != config.SimEndpoint {
				return errors.New("simulate models the built-in simulator: the run file's recipe.endpoint is " + cfg.Recipe.Endpoint + "; give a run file whose endpoint is \"sim\" (or --set recipe.endpoint=sim, with recipe.sim describing the engine), or use `headroom run` against the real server")
			}
			cfg.TimeScale = config.Virtual
			if err := cfg.Validate(); err != nil {
				return err
			}
			return runRecipe(cmd, stdout, stderr, cfg, f)
		},
	}
	f.rf.register(cmd)
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the summary as JSON")
	cmd.Flags().StringVar(&f.output, "output", "", "folder for run directories (default: the run file's output, runs)")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines on stderr")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "print every warning of every step, not each cause once")
	cmd.Flags().BoolVar(&f.printIt, "print-config", false, "print the resolved run file and exit without simulating")
	return cmd
}
