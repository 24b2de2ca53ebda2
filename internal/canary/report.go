package canary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/headroom-bench/headroom/internal/verdict"
)

// Markdown renders a canary's share steps and both sides' figures over
// time.
func (r Result) Markdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Canary: %s\n\n%s\n\n", r.Outcome, r.Reason)
	b.WriteString("## Share steps\n\n| share | from (s) | to (s) | outcome |\n|---|---|---|---|\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "| %g%% | %.0f | %.0f | %s |\n", 100*s.Share, s.StartS, s.EndS, s.Outcome)
	}
	b.WriteString("\n## Both sides, window by window\n\nEach row judges the windows of its share step so far. TTFT is the P90 in seconds, interactivity the P90 in tokens/s per user, each with its 95% interval; no worse is the candidate against the baseline on the same windows.\n\n")
	b.WriteString("| at (s) | share | windows | baseline | baseline TTFT | baseline interactivity | candidate | candidate TTFT | candidate interactivity | candidate errors | no worse | decision |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, t := range r.Ticks {
		fmt.Fprintf(&b, "| %.0f | %g%% | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", t.At, 100*t.Share, t.Windows,
			t.Baseline.Verdict, part(t.Baseline.Step, verdict.PartTTFT), part(t.Baseline.Step, verdict.PartInteractivity),
			t.Candidate.Verdict, part(t.Candidate.Step, verdict.PartTTFT), part(t.Candidate.Step, verdict.PartInteractivity), part(t.Candidate.Step, verdict.PartErrors),
			t.NoWorse.Verdict, t.Decision)
	}
	if n := len(r.Ticks); n > 0 {
		last := r.Ticks[n-1]
		fmt.Fprintf(&b, "\nLast decision: %s: %s\n", last.Decision, last.Why)
		b.WriteString("\nNo worse than today, at the last tick:\n\n")
		for _, c := range last.NoWorse.Parts {
			fmt.Fprintf(&b, "- %s: %s, %s (limit %g): %s\n", c.Name, c.Verdict, c.Value, c.Limit, c.Why)
		}
	}
	f := r.Final
	if r.ClientView {
		fmt.Fprintf(&b, "\nRequests: baseline %d (%d finished, %d not reached, %d sessions), candidate %d (%d finished, %d not reached, %d sessions); share now %g%%.\n",
			f.Counts[Baseline].Requests, f.Counts[Baseline].Finished, f.Counts[Baseline].NotReached, f.Counts[Baseline].Sessions,
			f.Counts[Candidate].Requests, f.Counts[Candidate].Finished, f.Counts[Candidate].NotReached, f.Counts[Candidate].Sessions, 100*f.Share)
	} else {
		fmt.Fprintf(&b, "\nRequests: not seen (the split is %s); share now %g%%.\n", r.Split, 100*f.Share)
	}
	if len(r.Weights) > 0 {
		b.WriteString("\n## Weights set (baseline/candidate)\n\n| change | share | weights | resourceVersion |\n|---|---|---|---|\n")
		for _, w := range r.Weights {
			fmt.Fprintf(&b, "| %s | %g%% | %s | %s |\n", w.Why, 100*w.Share, w.Weights, w.ResourceVersion)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nNote: %s\n", n)
	}
	return b.Bytes()
}

func part(st verdict.Step, name string) string {
	p, ok := st.Part(name)
	if !ok {
		return "-"
	}
	if p.Verdict == verdict.NoData && p.Value.Center == 0 {
		return "no data"
	}
	if name == verdict.PartErrors {
		return fmt.Sprintf("%.1f%% [%.1f, %.1f]", 100*p.Value.Center, 100*p.Value.Lo, 100*p.Value.Hi)
	}
	return fmt.Sprintf("%.3g [%.3g, %.3g]", p.Value.Center, p.Value.Lo, p.Value.Hi)
}

// Write puts canary.json and canary.md in dir.
func (r Result) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("canary: %w", err)
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("canary: encoding canary.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "canary.json"), append(j, '\n'), 0o644); err != nil {
		return fmt.Errorf("canary: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "canary.md"), r.Markdown(), 0o644); err != nil {
		return fmt.Errorf("canary: %w", err)
	}
	return nil
}
