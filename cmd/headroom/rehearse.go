package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/rehearse"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/spf13/cobra"
)

func rehearseCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		rf     runFileFlags
		short  bool
		only   string
		asJSON bool
		output string
	)
	cmd := &cobra.Command{
		Use:   "rehearse",
		Short: "Run the run file's phases against the simulated gateway once clean and once per fault, and check every verdict",
		Long: `rehearse is the rehearsal level: before a recipe gets a GPU window, it runs the
run file's phases (pre-flight, evals where a fault needs them, the first step
of the sweep, capacity, post-flight, rollback) against the built-in simulated
gateway, once clean and once per fault, on the virtual clock (the SIGINT row on a x100 scaled clock), and checks each
verdict against what must come out:

  clean                              a capacity
  crashed engine mid-step            fail or no data, never pass
  metrics gone                       no data (pre-flight stops)
  refused long prompts               errors counted: not pass
  stall                              no data or fail, never pass
  KV cache full mid-step             not pass
  warm-up that would eat the step    reported: warm-up too short
  abandoned requests                 post-flight fails
  malformed tool calls under load    the step fails on tool_calls
  wrong model live                   pre-flight fails
  slow start                         waited out
  SIGINT mid-step                    interrupted; rollback still happens

The run file's endpoint, metrics, credentials and deployer are replaced by
the simulator's (and a no-op deployer where a fault needs one); its bar,
workload, warm-up and step length are kept, with the ladder cut to its first
step. It prints a table (fault, expected, got, ok) and exits 1 when any row
is wrong. Each rehearsal writes a run directory under --output.`,
		Example: `  headroom rehearse                       # the built-in default run, every fault (seconds)
  headroom rehearse -f my-run.yaml --short
  headroom rehearse --only stall --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := rf.load()
			if err != nil {
				return err
			}
			dir := output
			if dir == "" {
				if dir, err = os.MkdirTemp("", "headroom-rehearse-"); err != nil {
					return err
				}
			}
			fmt.Fprintf(stderr, "rehearsal run directories under %s\n", dir)
			rows, err := rehearse.Run(cmd.Context(), rehearse.Base(cfg, dir), rehearse.Options{Short: short, Only: only, Progress: stderr})
			if asJSON {
				if werr := writeJSON(stdout, rows); werr != nil && err == nil {
					err = werr
				}
			} else if werr := rehearse.WriteTable(stdout, rows); werr != nil && err == nil {
				err = werr
			}
			if err != nil {
				return err
			}
			if len(rows) == 0 {
				return fmt.Errorf("--only %q matches no rehearsal", only)
			}
			if rehearse.Failed(rows) {
				return errors.New("a rehearsal gave a wrong verdict: the rig is not ready for a GPU window")
			}
			return nil
		},
	}
	rf.register(cmd)
	cmd.Flags().BoolVar(&short, "short", false, "only the clean run and three faults (what go test runs)")
	cmd.Flags().StringVar(&only, "only", "", "only the rehearsals whose fault contains this text")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the rows as JSON")
	cmd.Flags().StringVar(&output, "output", "", "folder for the rehearsals' run directories (default: a new temporary folder)")
	return cmd
}

func smokeCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		rf     runFileFlags
		asJSON bool
		stepS  float64
	)
	cmd := &cobra.Command{
		Use:   "smoke",
		Short: "Pre-flight, mini evals and one short step: has this recipe earned a GPU window?",
		Long: `smoke is the smoke level: against the run file's real endpoint, it runs
pre-flight, the mini evals and the first step of the ladder only, held for
--step-s seconds (default: three judge windows) after the run file's
warm-up, then post-flight and rollback. It answers "is this recipe worth a
window?" in minutes, not "what is its capacity?": one short step's intervals
are wide. Exit codes as for run.

` + runFileFlagsHelp,
		Example: `  headroom smoke -f my-run.yaml
  headroom smoke --endpoint http://127.0.0.1:8000 --model glm-5.3 --step-s 120

` + runFileFlagsExample("smoke"),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := rf.load()
			if err != nil {
				return err
			}
			cfg = smokeOf(cfg, stepS)
			if err := cfg.Validate(); err != nil {
				return err
			}
			sum, err := rig.Run(cmd.Context(), rig.Options{Config: cfg, Progress: stderr, Version: fullVersion()})
			if sum.RunDir != "" {
				if perr := printSummary(stdout, sum, asJSON, false); perr != nil && err == nil {
					err = perr
				}
			}
			if err != nil {
				return err
			}
			if code := rig.ExitCode(sum); code != rig.ExitHeld {
				return exitError{code: code}
			}
			return nil
		},
	}
	rf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	cmd.Flags().Float64Var(&stepS, "step-s", 0, "how long the one step is judged, in seconds (default: 3 judge windows)")
	return cmd
}

// smokeOf is the run file cut to a smoke test: the first step only, judged
// for stepS (3 windows when 0), that step being the target.
func smokeOf(cfg config.Run, stepS float64) config.Run {
	cfg.Sweep.Ladder = cfg.Sweep.Ladder[:1]
	cfg.Sweep.Mode = "ladder"
	cfg.Sweep.Stress = 0
	cfg.Sweep.Target = cfg.Sweep.Ladder[0]
	if stepS <= 0 {
		stepS = 3 * cfg.Sweep.WindowS
	}
	// held for --step-s, not run on until decided: smoke asks whether the
	// recipe earned a window, not what its capacity is
	cfg.Sweep.StepS, cfg.Sweep.MaxStepS = stepS, stepS
	return cfg
}
