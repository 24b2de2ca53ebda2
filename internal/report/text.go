package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
)

// WriteText prints the summary people read on the terminal. Its key line is
// the capacity with its interval and what limited it.
func WriteText(w io.Writer, s Summary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "recipe %s: %d x %d GPUs at $%.2f/GPU-hour; bar: P90 TTFT <= %gs, P90 interactivity >= %g tok/s/user, errors < %g%%\n",
		s.Recipe.Name, s.Recipe.Nodes, s.Recipe.GPUsPerNode, s.Recipe.USDPerGPUHour,
		s.Bar.TTFTP90, s.Bar.InteractivityP90, s.Bar.ErrorRate*100)
	b.WriteString("\n")
	writeStepTable(&b, s.Steps, false)
	if note := derivedNote(s.Steps); note != "" {
		b.WriteString(note + "\n")
	}
	b.WriteString("\n")
	for _, p := range s.Phases {
		fmt.Fprintf(&b, "phase %-12s %-8s %s\n", p.Name, p.Status, p.Detail)
	}
	if len(s.Phases) > 0 {
		b.WriteString("\n")
	}
	if len(s.Steps) == 0 {
		b.WriteString("capacity: not measured (no step was judged)\n")
	} else {
		fmt.Fprintf(&b, "capacity: %s\n", s.Capacity)
	}
	for _, m := range s.Mixes {
		fmt.Fprintf(&b, "capacity on %s: %s\n", m.Label(), m.Capacity)
	}
	fmt.Fprintf(&b, "cost: %s\n", costLine(s.Cost))
	if s.Target != nil {
		fmt.Fprintf(&b, "target %d sessions: %s\n", s.Target.Sessions, s.Target.Verdict)
	}
	if s.Capacity.Note != "" {
		fmt.Fprintf(&b, "note: %s\n", s.Capacity.Note)
	}
	fmt.Fprintf(&b, "stopped: %s\n", s.StopReason)
	if s.OverContext != nil {
		for _, l := range s.OverContext.Lines() {
			fmt.Fprintf(&b, "over context: %s\n", l)
		}
	}
	if len(s.Missing) > 0 {
		fmt.Fprintf(&b, "signals the bar wanted and did not get: %s\n", strings.Join(s.Missing, ", "))
	}
	for _, w := range s.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	if s.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", s.Error)
	}
	fmt.Fprintf(&b, "run directory: %s\n", s.RunDir)
	_, err := io.WriteString(w, b.String())
	return err
}

// Headline is a run's capacity and cost in one line, as the PR comment and
// the run's last notification give them: nothing a run did not establish
// reads as measured there either.
func Headline(s Summary) string {
	capacity := "not measured (no step was judged)"
	if len(s.Steps) > 0 {
		capacity = s.Capacity.String()
	}
	return fmt.Sprintf("capacity %s; cost %s", capacity, costLine(s.Cost))
}

// DoneText is the run's last notification (the PR comment's closing line):
// the recipe, its headline and why the sweep stopped.
func DoneText(s Summary) string {
	out := s.Recipe.Name + ": " + Headline(s)
	if s.StopReason != "" {
		out += "; " + s.StopReason
	}
	return out
}

func costLine(c sweep.Cost) string {
	if c.USDPerSessionHour == nil {
		floor := ""
		if c.USDPerSessionHourAtLeast != nil {
			floor = fmt.Sprintf(": at least $%.2f, with no upper end", *c.USDPerSessionHourAtLeast)
		}
		return fmt.Sprintf("n/a per session-hour (no step held the bar%s); the recipe costs $%.2f/hour", floor, c.USDPerHour)
	}
	prefix := "$"
	if c.AtMost {
		prefix = "<= $"
	}
	out := fmt.Sprintf("%s%.2f per session-hour", prefix, *c.USDPerSessionHour)
	if c.USDPerSessionHourLo != nil && c.USDPerSessionHourHi != nil && !c.AtMost {
		out += fmt.Sprintf(" (95%% interval $%.2f-$%.2f)", *c.USDPerSessionHourLo, *c.USDPerSessionHourHi)
	}
	out += fmt.Sprintf(" at $%.2f/hour", c.USDPerHour)
	if c.USDPerMillionTokens != nil {
		out += fmt.Sprintf("; $%.3f per million tokens at %d sessions", *c.USDPerMillionTokens, c.FromStep)
	} else {
		out += "; $/M tokens n/a (no step passed)"
	}
	return out
}

// writeStepTable writes the step table, as aligned text or as Markdown.
func writeStepTable(b *strings.Builder, steps []Step, md bool) {
	head := []string{"sessions", "verdict", "P90 TTFT s (95% CI)", "P90 tok/s/user (95% CI)", "errors (95% CI)", "turns", "in flight/session", "cache hit"}
	rows := [][]string{}
	for _, s := range steps {
		rows = append(rows, []string{
			fmt.Sprint(s.Sessions), string(s.Verdict),
			fmtCI(s.TTFTP90, 2, 1), interactivityCell(s), fmtPercentCI(s.ErrorRate, 1),
			fmt.Sprint(s.Load.Planned), fmt.Sprintf("%.2f", s.Load.InFlightPerSession), s.CacheHit(),
		})
	}
	if md {
		b.WriteString("| " + strings.Join(head, " | ") + " |\n")
		b.WriteString("|" + strings.Repeat("---|", len(head)) + "\n")
		for _, r := range rows {
			b.WriteString("| " + strings.Join(r, " | ") + " |\n")
		}
		return
	}
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = len(h)
		for _, r := range rows {
			width[i] = max(width[i], len(r[i]))
		}
	}
	line := func(cells []string) {
		for i, c := range cells {
			fmt.Fprintf(b, "%-*s", width[i]+2, c)
		}
		b.WriteString("\n")
	}
	line(head)
	for _, r := range rows {
		line(r)
	}
}

func fmtCI(s stats.Summary, digits int, scale float64) string {
	if math.IsNaN(s.Center) {
		return "no data"
	}
	f := func(v float64) string {
		if math.IsInf(v, 1) {
			return "inf"
		}
		return fmt.Sprintf("%.*f", digits, v*scale)
	}
	return fmt.Sprintf("%s (%s-%s)", f(s.Center), f(s.Lo), f(s.Hi))
}

// fmtPercentCI is fmtCI of a share, in percent.
func fmtPercentCI(s stats.Summary, digits int) string {
	if math.IsNaN(s.Center) {
		return "no data"
	}
	return fmtCI(s, digits, 100) + "%"
}
