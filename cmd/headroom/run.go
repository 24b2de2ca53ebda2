package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/live"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/telemetry"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

const exitCodesHelp = `Exit codes:
  0  the target held (with no target set: the run finished)
  1  rig error: bad run file, endpoint down, a phase failed, interrupted
  2  the target failed the bar
  3  the target was too close to call, or had no data`

func runCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		file    string
		asJSON  bool
		output  string
		quiet   bool
		printIt bool
		resume  string
		metrics string
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Sweep a recipe: step concurrent sessions up until one misses the bar, report capacity and cost",
		Long: `run replays agent sessions in closed-loop lanes against the recipe's endpoint,
one lane per concurrent session, and steps the sessions up the ladder. Each
step is judged only from the server's /metrics over its judged time. The sweep
stops at the first step that fails (or reads no data, or trips the kill
switch, or fills the KV cache), repeats the steps either side of the crossing,
waits for the engine to be idle, and reports capacity with a 95% interval and
cost per session-hour and per million tokens.

Phases, in order: pre-flight, mini evals, sweep, capacity, post-flight,
rollback. A failed phase ends the run with its reason.

Without -f it runs the built-in default: the simulated gateway in-process on a
loopback port, a synthesised half-heavy, half-light AgentX-like mix and the
reference report's bar, on a clock 100 times faster than modelled time.

Everything is written to runs/<recipe>/<timestamp>/ as the run goes: the
resolved config, records.jsonl (one line per request), metrics.jsonl (every
scrape), steps.jsonl, summary.json, report.md, report.html, report.json and
junit.xml. A killed run loses at most the step in flight; --resume continues it.
On SIGINT or SIGTERM the run stops issuing turns, cancels what is in flight,
runs post-flight and rollback, writes the partial report and exits with the
code of what it measured.

` + exitCodesHelp,
		Example: `  headroom run
  headroom run --json | jq .capacity
  headroom run -f examples/run.yaml
  headroom run --resume runs/recipe-0-vllm/20261129T093000Z
  headroom run --print-config > my-run.yaml   # start a run file from the default`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadRunFile(file)
			if err != nil {
				return err
			}
			if output != "" {
				cfg.Output = output
			}
			if printIt {
				b, err := yaml.Marshal(cfg.Redacted()) // never a secret, even on the terminal
				if err != nil {
					return err
				}
				_, err = stdout.Write(b)
				return err
			}
			opts := rig.Options{Config: cfg, Progress: stderr, Version: version, Live: live.IsTerminal(stderr, os.Getenv)}
			if quiet {
				opts.Progress = nil
			}
			if metrics != "" {
				tel := telemetry.New(cfg.Recipe.Name, version)
				addr, err := tel.Serve(cmd.Context(), metrics)
				if err != nil {
					return fmt.Errorf("--metrics-addr %s: %w", metrics, err)
				}
				fmt.Fprintf(stderr, "headroom's own metrics at http://%s/metrics\n", addr)
				opts.Telemetry = tel
			}
			if resume != "" {
				if file != "" {
					return errors.New("--resume takes the run file saved in the run directory; drop -f")
				}
				d, err := report.OpenDir(resume)
				if err != nil {
					return fmt.Errorf("--resume: %w", err)
				}
				opts.Resume = d
			}
			sum, err := rig.Run(cmd.Context(), opts)
			if sum.RunDir != "" {
				if rerr := renderAll(sum.RunDir); rerr != nil && err == nil {
					err = rerr
				}
			}
			if sum.RunDir != "" && (err == nil || sum.Steps != nil) {
				if perr := printSummary(stdout, sum, asJSON); perr != nil && err == nil {
					err = perr
				}
			}
			var intr *rig.Interrupted
			if errors.As(err, &intr) {
				// an interrupted run exits with the code of what it measured
				fmt.Fprintln(stderr, "headroom:", err)
				err = nil
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
	cmd.Flags().StringVarP(&file, "file", "f", "", "run file (YAML); default: the built-in simulated run")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	cmd.Flags().StringVar(&output, "output", "", "folder for run directories (default: the run file's output, runs)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	cmd.Flags().BoolVar(&printIt, "print-config", false, "print the resolved run file and exit without sending load")
	cmd.Flags().StringVar(&resume, "resume", "", "continue the run in this directory after its last finished step")
	cmd.Flags().StringVar(&metrics, "metrics-addr", "", "serve headroom's own /metrics (phase, step, sessions, in flight, running P90s, verdicts) on this address, e.g. :9464")
	return cmd
}

// renderAll writes every rendering of a run directory.
func renderAll(dir string) error {
	d, err := report.OpenDir(dir)
	if err != nil {
		return err
	}
	return report.Render(d)
}

func printSummary(w io.Writer, sum report.Summary, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	return report.WriteText(w, sum)
}

// loadRunFile reads a run file, or gives the built-in default run when file
// is empty.
func loadRunFile(file string) (config.Run, error) {
	if file == "" {
		return config.Default(), nil
	}
	return config.Load(file)
}
