package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/fidelity"
	"github.com/spf13/cobra"
)

func fidelityCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		out, dir, runs string
		from           string
		asJSON, quiet  bool
		workers        int
		recipes        []int
		sets           []string
	)
	cmd := &cobra.Command{
		Use:   "fidelity",
		Short: "Sweep the reference report's recipes on the simulator and set every published cell beside its simulated value",
		Long: `fidelity runs every reference recipe (examples/reference, named by its
published.yaml) on the virtual clock on today's mix and on light-only and
heavy-only ladders (24 sweeps), two at a time, and writes the table of
docs/fidelity.md: per recipe and cell, the value the reference report
published beside the simulated one, and whether it is within issue 13's
tolerance (capacities within the published interval or one ladder step of
it, the same limiting part, $ per session-hour within 10% and $ per million
tokens within 25%, and the report's claims: the ordering of the recipes,
128K failing on errors, prefill/decode over TCP failing at a few light-only
sessions, the host cache adding nothing while the KV cache peaks under half,
light-only sessions keeping more requests in flight than heavy-only ones).
A cell the model cannot reach reads "not reachable" with the reason.

It exits 0 when the study ran, whatever the cells read; the table says
which hold.`,
		Example: `  headroom sim fidelity -o docs/fidelity.md
  headroom sim fidelity --json | jq '.table.cells[] | select(.headline and .status != "held")'
  headroom sim fidelity --recipes 0,1 --set sweep.step_s=300 -o /tmp/fidelity.md
  headroom sim fidelity --json -o docs/fidelity.md > study.json && headroom sim fidelity --from study.json -o docs/fidelity.md`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ovs []config.Override
			for _, s := range sets {
				ov, err := config.ParseSet(s)
				if err != nil {
					return err
				}
				ovs = append(ovs, ov)
			}
			pub, err := fidelity.Load(filepath.Join(dir, "published.yaml"))
			if err != nil {
				return err
			}
			if from != "" {
				doc, err := fidelity.ReadDoc(from)
				if err != nil {
					return err
				}
				doc.Published, doc.RenderedFrom, doc.Table = pub, from, fidelity.Compare(pub, doc.Study, fidelity.ModelLimits())
				return writeFidelity(stdout, doc, out, asJSON)
			}
			keep := runs != ""
			if !keep {
				if runs, err = os.MkdirTemp("", "headroom-fidelity-"); err != nil {
					return err
				}
				defer os.RemoveAll(runs)
			}
			o := fidelity.StudyOptions{Dir: dir, Published: pub, Recipes: recipes, Sets: ovs, Workers: workers, Output: runs}
			if !quiet {
				o.Progress = stderr
			}
			st, err := fidelity.RunStudy(cmd.Context(), o)
			if err != nil {
				return err
			}
			doc := fidelity.Doc{
				Command:   commandLine(cmd, out, recipes, sets),
				Host:      fmt.Sprintf("%d cores, %s/%s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH),
				Published: pub, Study: st,
				Table: fidelity.Compare(pub, st, fidelity.ModelLimits()),
			}
			if err := writeFidelity(stdout, doc, out, asJSON); err != nil {
				return err
			}
			held, all := doc.Table.Headlines()
			if !quiet {
				fmt.Fprintf(stderr, "%d of %d headline cells hold; %d sweeps in %.0f s\n", held, all, len(st.Sweeps), st.WallS)
				if keep {
					fmt.Fprintf(stderr, "run directories in %s\n", runs)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the Markdown table to this file (docs/fidelity.md); default stdout")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the study and its table as JSON on stdout")
	cmd.Flags().StringVar(&dir, "dir", filepath.Join("examples", "reference"), "folder of published.yaml and the run files it names")
	cmd.Flags().StringVar(&runs, "runs", "", "keep the run directories here (default: a temporary folder, removed after)")
	cmd.Flags().IntVar(&workers, "workers", 2, "sweeps run at once, each on its own virtual clock")
	cmd.Flags().IntSliceVar(&recipes, "recipes", nil, "only these recipes (default: every published one)")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "change every run file: path=value, as run --set")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	cmd.Flags().StringVar(&from, "from", "", "render again from a study --json wrote (no sweeps run; the table is judged anew)")
	return cmd
}

// writeFidelity prints the doc as JSON (--json) and writes its Markdown to
// out, or to stdout when neither is asked for.
func writeFidelity(stdout io.Writer, doc fidelity.Doc, out string, asJSON bool) error {
	if asJSON {
		if err := doc.JSON(stdout); err != nil {
			return err
		}
	}
	var md bytes.Buffer
	if err := doc.Markdown(&md); err != nil {
		return err
	}
	switch {
	case out != "":
		if err := os.WriteFile(out, md.Bytes(), 0o644); err != nil {
			return fmt.Errorf("-o %s: %w", out, err)
		}
	case !asJSON:
		_, err := stdout.Write(md.Bytes())
		return err
	}
	return nil
}

// commandLine is the command as it was given, for the doc's header.
func commandLine(cmd *cobra.Command, out string, recipes []int, sets []string) string {
	parts := []string{cmd.CommandPath()}
	if out != "" {
		parts = append(parts, "-o", out)
	}
	if f := cmd.Flags().Lookup("dir"); f != nil && f.Changed {
		parts = append(parts, "--dir", f.Value.String())
	}
	if f := cmd.Flags().Lookup("workers"); f != nil && f.Changed {
		parts = append(parts, "--workers", f.Value.String())
	}
	if len(recipes) > 0 {
		var rs []string
		for _, r := range recipes {
			rs = append(rs, fmt.Sprint(r))
		}
		parts = append(parts, "--recipes", strings.Join(rs, ","))
	}
	for _, s := range sets {
		parts = append(parts, "--set", s)
	}
	return strings.Join(parts, " ")
}
