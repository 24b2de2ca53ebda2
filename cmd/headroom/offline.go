package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/spf13/cobra"
)

func planCmd(stdout io.Writer) *cobra.Command {
	var (
		rf     runFileFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "The dry plan of a run: phases, steps, requests expected, signals and GPU minutes, without sending load",
		Long: `plan validates a run file and prints what a run of it would do: each phase and
its worst-case time, each step with the requests it should send, every signal
the bar needs and where it will come from, and the GPU minutes against the
recipe's window. It exits non-zero when the run file is invalid or the plan
does not fit the window.

` + runFileFlagsHelp,
		Example: `  headroom plan -f examples/run.yaml
  headroom plan            # the built-in default run

` + runFileFlagsExample("plan"),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := rf.load()
			if err != nil {
				return err
			}
			p, err := rig.MakePlan(cfg)
			if err != nil {
				return err
			}
			p.Notes = append(append([]string(nil), rf.notes...), p.Notes...)
			if asJSON {
				err = writeJSON(stdout, p)
			} else {
				err = p.WriteText(stdout)
			}
			if err != nil {
				return err
			}
			if !p.Fits {
				return fmt.Errorf("the plan does not fit the %.0f-minute window (%.0f minutes worst case)", p.WindowMin, p.Minutes)
			}
			return nil
		},
	}
	rf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	return cmd
}

func judgeCmd(stdout io.Writer) *cobra.Command {
	var (
		asJSON         bool
		ttft, interact float64
		errRate        float64
	)
	cmd := &cobra.Command{
		Use:   "judge DIR",
		Short: "Re-judge a saved run from its scrapes and records, e.g. under another bar, without sending load",
		Long: `judge recomputes every step's verdict, the capacity and the cost from a run
directory's metrics.jsonl and records.jsonl, under the run's own bar or the one
given by flags. Nothing in the directory is changed.

` + exitCodesHelp,
		Example: `  headroom judge runs/sim-recipe-0/20261129T093000Z
  headroom judge --ttft-p90 4 --interactivity-p90 12 runs/sim-recipe-0/20261129T093000Z`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := report.OpenDir(args[0])
			if err != nil {
				return err
			}
			var bar *config.Bar
			if ttft > 0 || interact > 0 || errRate > 0 {
				saved, err := rig.ReadRun(d)
				if err != nil {
					return err
				}
				b := saved.Config.Bar
				if ttft > 0 {
					b.TTFTP90S = ttft
				}
				if interact > 0 {
					b.InteractivityP90TPS = interact
				}
				if errRate > 0 {
					b.ErrorRate = errRate
				}
				bar = &b
			}
			sum, err := rig.Judge(d, bar)
			if err != nil {
				return err
			}
			if err := printSummary(stdout, sum, asJSON, false); err != nil {
				return err
			}
			if code := rig.ExitCode(sum); code != rig.ExitHeld {
				return exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	cmd.Flags().Float64Var(&ttft, "ttft-p90", 0, "bar: P90 TTFT at most this many seconds (default: the run's)")
	cmd.Flags().Float64Var(&interact, "interactivity-p90", 0, "bar: P90 tokens/s per user at least this (default: the run's)")
	cmd.Flags().Float64Var(&errRate, "error-rate", 0, "bar: error rate below this fraction (default: the run's)")
	return cmd
}

func reportCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR",
		Short: "Render a run directory: report.md with its SVG charts, report.html (self-contained), report.json, junit.xml, steps.csv and records.csv",
		Example: `  headroom report runs/sim-recipe-0/20261129T093000Z
  xdg-open runs/sim-recipe-0/20261129T093000Z/report.html`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := report.OpenDir(args[0])
			if err != nil {
				return err
			}
			if err := report.Render(d); err != nil {
				return err
			}
			for _, f := range []string{"report.md", "report.html", "report.json", "junit.xml", "steps.csv", "records.csv"} {
				if _, err := os.Stat(d.File(f)); err == nil { // records.csv only where records.jsonl is
					fmt.Fprintln(stdout, d.File(f))
				}
			}
			return nil
		},
	}
}

func compareCmd(stdout io.Writer) *cobra.Command {
	var (
		htmlOut       string
		asJSON, asCSV bool
	)
	cmd := &cobra.Command{
		Use:   "compare DIR...",
		Short: "Compare recipes across run directories: sessions at the bar, limited by, target, $/session-hour, $/M tokens",
		Long: `compare lays out the runs of several recipes as one table, the way the
reference report compares its recipes: GPUs, sessions at the bar with the
interval, what limited it, whether the target held, $ per session-hour with
its interval and per million tokens, and light-only and heavy-only capacity
where those runs (or a run's light and heavy ladders) exist. ★ marks the
recipe that holds the target at the lowest $ per session-hour; when its
interval overlaps the next holder's, no recipe is starred and the table says
they are too close to call. Runs judged against different bars or different
targets are never ranked: no recipe is starred, and the notes say why. A run
in which no step held the bar reads "not established", with no price.

Markdown goes to stdout, or JSON with --json, or CSV (one row per recipe)
with --csv. --html writes the page with every recipe's P90 TTFT and P90
interactivity curves overlaid and the sessions per node and per dollar.`,
		Example: `  headroom compare runs/recipe-0/* runs/recipe-1/* --html compare.html
  headroom compare --json runs/recipe-0/* runs/recipe-1/* | jq .best
  headroom compare --csv runs/*/* > recipes.csv`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && asCSV {
				return fmt.Errorf("--json and --csv both choose what compare prints: give one of them")
			}
			var dirs []*report.Dir
			for _, a := range args {
				d, err := report.OpenDir(a)
				if err != nil {
					return err
				}
				dirs = append(dirs, d)
			}
			c, err := report.CompareRuns(dirs)
			if err != nil {
				return err
			}
			out := c.Markdown()
			switch {
			case asJSON:
				if out, err = c.JSON(); err != nil {
					return err
				}
			case asCSV:
				out = c.CSV()
			}
			if _, err := stdout.Write(out); err != nil {
				return err
			}
			if htmlOut != "" {
				return os.WriteFile(htmlOut, c.HTML(), 0o644)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&htmlOut, "html", "", "also write the comparison page (self-contained HTML) to this file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the comparison as JSON instead of Markdown")
	cmd.Flags().BoolVar(&asCSV, "csv", false, "print the comparison as CSV, one row per recipe, instead of Markdown")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
