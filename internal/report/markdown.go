package report

import (
	"fmt"
	"strings"
)

// Markdown renders report.md from a summary alone; its charts are linked
// as the SVG files RenderRun writes beside it.
func Markdown(s Summary) []byte {
	r := Run{Summary: s}
	return markdown(r, runFigures(r))
}

// markdown renders report.md: the headline, the charts (SVG files beside
// it), the tables and the same warnings report.html shows.
func markdown(r Run, figs figureSet) []byte {
	s := r.Summary
	var b strings.Builder
	fmt.Fprintf(&b, "# headroom: %s\n\n", s.Recipe.Name)
	if len(s.Steps) == 0 {
		b.WriteString("**Capacity: not measured (no step was judged).**  \n")
	} else {
		fmt.Fprintf(&b, "**Capacity: %s.**  \n", s.Capacity)
	}
	fmt.Fprintf(&b, "**Cost: %s.**\n\n", costLine(s.Cost))
	if s.Target != nil {
		fmt.Fprintf(&b, "Target of %d sessions: **%s**.\n\n", s.Target.Sessions, verdictWords(s.Target.Verdict))
	}
	if s.Blocked != "" {
		fmt.Fprintf(&b, "**Blocked:** %s: the recipe fails whatever its capacity.\n\n", s.Blocked)
	}
	if s.Capacity.Note != "" {
		fmt.Fprintf(&b, "Note: %s.\n\n", strings.TrimSuffix(s.Capacity.Note, "."))
	}
	if s.StopReason != "" {
		fmt.Fprintf(&b, "Stopped: %s.\n\n", strings.TrimSuffix(s.StopReason, "."))
	}
	fmt.Fprintf(&b, "Recipe: %s %s, model `%s` at `%s`.\n\n",
		s.Recipe.Engine, hardwarePhrase(s.Recipe, "x"), s.Recipe.Model, s.Recipe.Endpoint)
	fmt.Fprintf(&b, "Bar: P90 TTFT <= %g s; P90 interactivity >= %g tokens/s per user; errors < %g%%. ", s.Bar.TTFTP90, s.Bar.InteractivityP90, s.Bar.ErrorRate*100)
	b.WriteString("Each value is judged from the server's metrics over the step's judged time, with a 95% bootstrap interval over windows; an interval that crosses the bar reads too close to call.\n\n")
	if len(s.Mixes) > 0 {
		b.WriteString("## Capacity on each mix\n\n")
		writeMixTable(&b, s, false)
		b.WriteString("\n")
	}

	b.WriteString("## The bar against concurrent sessions\n\n")
	writeFigures(&b, figs.bar)
	if len(figs.mixes) > 0 {
		b.WriteString("## Each mix's ladder\n\n")
		writeFigures(&b, figs.mixes)
	}

	b.WriteString("## Steps\n\n")
	writeStepTable(&b, s.Steps, true)
	if note := derivedNote(s.Steps); note != "" {
		b.WriteString("\n" + note + "\n")
	}
	b.WriteString("\n### Parts\n\n| sessions | part | verdict | value | 95% interval | bar | margin | source |\n|---|---|---|---|---|---|---|---|\n")
	for _, st := range s.Steps {
		for _, p := range st.Parts {
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s |\n",
				st.Sessions, p.Name, p.Verdict, partValue(p), partInterval(p), partBar(p), partMargin(p), p.Source)
		}
	}
	if len(figs.tiers) > 0 {
		b.WriteString("\n## Requests in flight per session, by tier\n\n")
		if line := tierFinding(r.Tiers); line != "" {
			b.WriteString(line + "\n\n")
		}
		writeFigures(&b, figs.tiers)
		writeTierTable(&b, r.Tiers, false)
	}
	b.WriteString("\n## The engine over time\n\n")
	writeFigures(&b, figs.engine)

	b.WriteString("## Client-side cross-checks\n\nKept for cross-checks only; the verdicts above use the server's numbers.\n\n")
	b.WriteString("| sessions | turns sent | errors seen by client | client P90 TTFT s | prompt tokens served vs planned |\n|---|---|---|---|---|\n")
	for _, st := range s.Steps {
		ttft, drift := "no data", "no data"
		if st.Load.ClientTTFTP90 > 0 {
			ttft = fmt.Sprintf("%.2f", st.Load.ClientTTFTP90)
		}
		if st.Load.Sent > 0 {
			drift = fmt.Sprintf("%+.2f%%", st.Load.PromptDrift*100)
		}
		fmt.Fprintf(&b, "| %d | %d | %d | %s | %s |\n", st.Sessions, st.Load.Sent, st.Load.ClientErrors, ttft, drift)
	}
	if s.OverContext != nil {
		b.WriteString("\n## Turns over the served context\n\n")
		for _, l := range s.OverContext.Lines() {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	b.WriteString("\n## Missing signals\n\n")
	if len(s.Missing) == 0 {
		b.WriteString("None: every signal the bar wanted was reported.\n")
	} else {
		for _, m := range s.Missing {
			fmt.Fprintf(&b, "- %s\n", m)
		}
	}
	b.WriteString("\n## Warnings\n\n")
	ws := warningsOf(r)
	if len(ws) == 0 {
		b.WriteString("None.\n")
	}
	for _, w := range ws {
		fmt.Fprintf(&b, "- %s\n", w)
	}
	b.WriteString("\n## Run\n\n")
	for _, f := range runFields(s) {
		v := f.text
		if strings.HasPrefix(f.html, "<code>") {
			v = "`" + v + "`"
		}
		fmt.Fprintf(&b, "- **%s:** %s\n", f.label, v)
	}
	return []byte(b.String())
}

// writeFigures links each chart's SVG file, with its caption.
func writeFigures(b *strings.Builder, figs []figure) {
	for _, f := range figs {
		fmt.Fprintf(b, "![%s](%s)\n\n*%s*\n\n", f.title, f.file, f.caption)
	}
}

// pricePhrase is how the reports state a recipe's price: "at $1.80 per
// GPU-hour", or "not priced" where the run was given none (0), never $0.00.
func pricePhrase(usdPerGPUHour float64) string {
	if usdPerGPUHour == 0 {
		return "not priced"
	}
	return fmt.Sprintf("at $%.2f per GPU-hour", usdPerGPUHour)
}
