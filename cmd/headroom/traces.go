package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/headroom-bench/headroom/internal/trace"
	"github.com/spf13/cobra"
)

func tracesCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "traces",
		Short: "Describe and synthesise agent traces (Weka/AgentX format)",
	}
	var asJSON bool
	stats := &cobra.Command{
		Use:   "stats PATH...",
		Short: "Tier statistics of trace files or folders: heavy (longest quarter), light (shortest quarter), all",
		Long: `stats reads Weka/AgentX traces (a JSON file per trace, a folder of them, or
JSONL with one trace per line, gzipped or not) and prints, per tier, the
traces, requests, median and p90 prompt, the share of prompts over 128K
tokens, the median answer and the share of traces with subagents.

A trace's prompt length, which cuts the tiers, is the median 'in' of its
requests, subagent requests included.`,
		Example: `  headroom traces stats ../shared/traces/weka-claude-code.jsonl.gz
  headroom traces stats --json traces/ | jq '.tiers[0]'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, paths []string) error {
			all, err := readTraces(paths)
			if err != nil {
				return err
			}
			if len(all) == 0 {
				return fmt.Errorf("no traces in %s", strings.Join(paths, ", "))
			}
			heavy, light := trace.Tiers(all)
			tiers := []trace.TierStats{trace.Describe("heavy", heavy), trace.Describe("light", light), trace.Describe("all", all)}
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"tiers": tiers})
			}
			fmt.Fprintf(stdout, "%-6s %7s %9s %14s %11s %11s %14s %15s\n", "tier", "traces", "requests", "median prompt", "p90 prompt", "over 128K", "median answer", "with subagents")
			for _, t := range tiers {
				fmt.Fprintf(stdout, "%-6s %7d %9d %14d %11d %10.0f%% %14d %14.0f%%\n", t.Name, t.Traces, t.Requests, t.MedianPrompt, t.P90Prompt, 100*t.Over128K, t.MedianAnswer, 100*t.WithSubagents)
			}
			return nil
		},
	}
	stats.Flags().BoolVar(&asJSON, "json", false, "print {\"tiers\": [...]} as JSON, shares as fractions")

	var (
		sessions int
		seed     uint64
		heavy    float64
		out      string
		cold     bool
	)
	synth := &cobra.Command{
		Use:   "synth",
		Short: "Synthesise AgentX-like sessions calibrated to the published heavy/light tier table",
		Example: `  headroom traces synth --sessions 400 --seed 1 -o synth.jsonl
  headroom traces synth --sessions 400 --cold-resumes -o synth-cold.jsonl
  headroom traces stats synth.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sessions < 4 {
				return fmt.Errorf("--sessions %d: at least 4 are needed (a quarter make each tier)", sessions)
			}
			if heavy < 0 || heavy > 1 {
				return fmt.Errorf("--heavy %g: a share between 0 and 1", heavy)
			}
			ts := trace.Synthesize(trace.SynthOptions{Sessions: sessions, Seed: seed, HeavyShare: heavy, ColdResumes: cold})
			w := stdout
			if out != "" && out != "-" {
				f, err := os.Create(out)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			return trace.WriteJSONL(w, ts)
		},
	}
	synth.Flags().IntVar(&sessions, "sessions", 200, "sessions to write")
	synth.Flags().Uint64Var(&seed, "seed", 1, "seed; the same seed writes the same sessions")
	synth.Flags().Float64Var(&heavy, "heavy", 0.5, "share of heavy sessions")
	synth.Flags().BoolVar(&cold, "cold-resumes", false, "resume some turns cold after a pause (their history's blocks new), at the rate real Claude Code sessions do for a pause that long")
	synth.Flags().StringVarP(&out, "output", "o", "-", "file to write (JSONL, one trace per line); - for stdout")
	cmd.AddCommand(stats, synth, anonymiseCmd(stdout))
	return cmd
}

// readTraces reads every path's traces (a file or a directory of them), in
// order.
func readTraces(paths []string) ([]trace.Trace, error) {
	var all []trace.Trace
	for _, p := range paths {
		ts, err := trace.ReadPath(p)
		if err != nil {
			return nil, err
		}
		all = append(all, ts...)
	}
	return all, nil
}
