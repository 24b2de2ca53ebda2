package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/headroom-bench/headroom/internal/recommend"
	"github.com/spf13/cobra"
)

func recommendCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		file, htmlOut, output string
		asJSON, quiet         bool
		workers               int
	)
	cmd := &cobra.Command{
		Use:   "recommend -f SPACE.yaml",
		Short: "Search a space of simulated recipes on a virtual clock and rank those that hold the target by $ per session-hour",
		Long: `recommend reads a space file: a base run file (a path relative to the space
file, or the run file inline), fields every candidate changes (set), axes
whose product is the candidates (each a run-file field path as --set takes
it with a list of values, or named options that set several fields
together: a layout, an engine), optional constraints (max_gpus,
max_usd_per_hour) and the target sessions. A space holds at most 200
candidates.

Every candidate is the base with its values on top, checked exactly as a run
file is; an invalid combination, or one over a constraint, is skipped and
listed with the reason. The others are simulated (--workers at a time) as
` + "`headroom simulate`" + ` would: the built-in simulator on a virtual clock, with the
adaptive sweep (doubling from the ladder's first step until one misses, then
bisecting to the space's resolution), so each costs few simulated steps.
Each leaves its run directory, as a run does.

Candidates whose target step passed are ranked by $ per session-hour, with
their capacity intervals; two neighbours whose cost intervals overlap are too
close to call. A candidate whose capacity interval straddles the target, or
whose target read no data, needs a GPU window to settle; one whose interval
lies below the target does not hold it. The figures are the model's, not a
measurement: verify the shortlist on GPUs (docs/simulator.md, "Recommend").

The table goes to stdout (--json prints the result as JSON instead), --html
writes a self-contained page, and a line per candidate goes to stderr as
each finishes.

Exit codes:
  0  at least one candidate holds the target
  1  bad space file, or interrupted
  2  no candidate holds the target, and none needs a GPU window
  3  no candidate holds the target, but some need a GPU window to settle`,
		Example: `  headroom recommend -f examples/recommend/space.yaml
  headroom recommend -f space.yaml --json | jq '.candidates[] | select(.status == "holds")'
  headroom recommend -f space.yaml --html recommend.html --workers 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("recommend needs a space file: -f SPACE.yaml (examples/recommend/space.yaml is one to start from)")
			}
			s, err := recommend.Load(file)
			if err != nil {
				return err
			}
			if output != "" {
				s.Output = output
			}
			o := recommend.Options{Workers: workers, Progress: stderr, Version: fullVersion()}
			if quiet {
				o.Progress = nil
			}
			res, err := recommend.Search(cmd.Context(), s, o)
			if err != nil && len(res.Candidates) == 0 {
				return err
			}
			if asJSON {
				b, jerr := res.JSON()
				if jerr != nil {
					return jerr
				}
				if _, jerr := stdout.Write(b); jerr != nil {
					return jerr
				}
			} else if _, werr := io.WriteString(stdout, res.Table()); werr != nil {
				return werr
			}
			if htmlOut != "" {
				if herr := os.WriteFile(htmlOut, res.HTML(), 0o644); herr != nil {
					return fmt.Errorf("--html: %w", herr)
				}
				if !quiet {
					fmt.Fprintf(stderr, "page: %s\n", htmlOut)
				}
			}
			switch {
			case err != nil:
				return fmt.Errorf("interrupted: the candidates not simulated are listed as errors: %w", err)
			case res.Counts[recommend.Holds] > 0:
				return nil
			case res.Counts[recommend.NeedsWindow] > 0:
				return exitError{3}
			}
			return exitError{2}
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the space file (see examples/recommend/space.yaml)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON instead of the table")
	cmd.Flags().StringVar(&htmlOut, "html", "", "also write the result as a self-contained HTML page to this file")
	cmd.Flags().StringVar(&output, "output", "", "folder for the candidates' run directories (default: the space's output, else the base's)")
	cmd.Flags().IntVar(&workers, "workers", 2, "candidates simulated at once (each virtual run has its own clock)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	return cmd
}
