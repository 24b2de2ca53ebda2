package main

import (
	"fmt"
	"io"
	"os"

	"github.com/headroom-bench/headroom/internal/transfer"
	"github.com/spf13/cobra"
)

// transferFixtures is the transfer study's cases file in the repository.
const transferFixtures = "internal/transfer/testdata/cases/cases.yaml"

func transferCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		cases, out string
		asJSON     bool
	)
	cmd := &cobra.Command{
		Use:   "transfer",
		Short: "Calibrate on recorded runs of a server that is not ours and predict other workloads and engine settings on it, against what was measured",
		Long: `transfer reads a cases file: each case fits a profile to some recorded run
directories (headroom sim calibrate) and predicts another recorded run's
recipe with it on the virtual clock (its workload, ladder and engine args:
another mix, another bar, another --max-num-seqs). The prediction runs three
times, on the fitted profile and on it moved 1.96 standard errors slower and
faster, and a fourth where the runs could not tell whether the engine's TTFT
counts queue time (they never queued), with the other answer; the capacity
interval given is the union of them, so it carries the fit's own
uncertainty as well as the sweep's. It prints, as
docs/simulator.md has it: case, predicted, measured, error in ladder steps,
and whether the interval covers the measured capacity.

The recorded runs in the repository (` + transferFixtures + `) are of
llm-d-inference-sim, an independent vLLM simulator; docs/simulator.md says
how they were made.`,
		Example: `  headroom sim study transfer
  headroom sim study transfer --cases my-cases.yaml --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, err := transfer.LoadCases(cases)
			if err != nil {
				return err
			}
			d := out
			if d == "" {
				if d, err = os.MkdirTemp("", "headroom-transfer-"); err != nil {
					return err
				}
			}
			fmt.Fprintf(stderr, "transfer: %d cases, predicted runs under %s\n", len(cs), d)
			rows, err := transfer.Measure(cmd.Context(), cs, d, predictRunner(predictScale))
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, rows)
			}
			return transfer.WriteTable(stdout, rows)
		},
	}
	cmd.Flags().StringVar(&cases, "cases", transferFixtures, "the cases file (YAML: name, calibrate: [run dirs], measured: run dir; paths relative to it)")
	cmd.Flags().StringVar(&out, "output", "", "folder for the predicted runs and profiles (default: a temporary folder)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the rows as JSON")
	return cmd
}
