package main

import (
	"io"

	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/spf13/cobra"
)

func evalCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		file   string
		asJSON bool
		suites []string
		custom []string
	)
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Run the mini evals alone: tool calls against their schemas, long-context read-back, custom suites",
		Long: `eval sends the run file's eval suites to the recipe's endpoint one request at
a time, each capped by max_tokens and a deadline, and judges each suite by a
95% Clopper-Pearson interval on its pass rate: a suite blocks the recipe only
when the interval's upper bound is below its threshold; otherwise it reads
pass or inconclusive. It exits 2 when a suite blocks, 0 otherwise.`,
		Example: `  headroom eval -f examples/run.yaml
  headroom eval --suite tool_calling --custom examples/evals/custom.jsonl   # against the built-in simulator`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadRunFile(file)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("suite") {
				cfg.Evals.Suites = suites
			}
			if len(custom) > 0 {
				cfg.Evals.Custom = custom
			}
			if len(cfg.Evals.Suites) == 0 && len(cfg.Evals.Custom) == 0 {
				cfg.Evals.Suites = []string{"tool_calling", "long_context_readback"}
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			if cfg.TimeScale.Virtual() {
				cfg.TimeScale = 1 // the evals alone need no virtual clock
			}
			clock, err := timescale.New(cfg.TimeScale.Wall())
			if err != nil {
				return err
			}
			endpoint, _, stop, err := rig.Endpoint(cfg, stderr)
			if err != nil {
				return err
			}
			defer stop()
			rep, err := rig.RunEvals(cmd.Context(), cfg, endpoint, clock)
			if err != nil {
				return err
			}
			if asJSON {
				err = writeJSON(stdout, rep)
			} else {
				err = rep.WriteText(stdout)
			}
			if err != nil {
				return err
			}
			if rep.Blocked() {
				return exitError{code: rig.ExitFail}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "run file (YAML) naming the endpoint and the evals; default: the built-in simulator")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the eval report as JSON")
	cmd.Flags().StringSliceVar(&suites, "suite", nil, "built-in suites to run (tool_calling, long_context_readback); overrides the run file")
	cmd.Flags().StringSliceVar(&custom, "custom", nil, "custom suite JSONL files; overrides the run file")
	return cmd
}
