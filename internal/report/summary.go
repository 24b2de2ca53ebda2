package report

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// SummaryVersion is the version of summary.json.
const SummaryVersion = 1

// Summary is what a run found: the JSON of `headroom run --json`, the
// summary.json of the run directory, and the source of every rendering.
type Summary struct {
	Version    int                  `json:"version"`
	Recipe     Recipe               `json:"recipe"`
	Bar        verdict.Bar          `json:"bar"`
	Capacity   sweep.Capacity       `json:"capacity"`
	Target     *sweep.TargetVerdict `json:"target,omitempty"`
	Stress     *sweep.TargetVerdict `json:"stress,omitempty"`
	Phases     []Phase              `json:"phases,omitempty"`
	Cost       sweep.Cost           `json:"cost"`
	Steps      []Step               `json:"steps"`
	Missing    []string             `json:"missing_signals"`
	Warnings   []string             `json:"warnings"`
	StopReason string               `json:"stop_reason"`
	PostFlight sweep.PostFlight     `json:"post_flight"`
	RunDir     string               `json:"run_dir"`
	Started    string               `json:"started"`
	WallS      float64              `json:"wall_s"`
	TimeScale  float64              `json:"time_scale"`
	// Calibration is how many tokens the server makes of one placeholder word.
	Calibration *prompt.Calibration `json:"calibration,omitempty"`
	Versions    map[string]string   `json:"versions"`
	// Mix is the workload's share of each tier, when the run recorded it;
	// compare reads it to tell light-only and heavy-only runs apart.
	Mix *Mix `json:"mix,omitempty"`
	// OverContext is how many planned turns need more than the served
	// context, and how many were dropped for it; nil when the context was
	// not known or pre-flight did not get that far.
	OverContext *OverContext `json:"over_context,omitempty"`
}

// OverContext is how the run's planned turns (the turns of every session
// its tiers may replay, subagents' included) fit the served context: a turn
// is over it when its prompt plus its max_tokens cap exceed it, as vLLM
// refuses it.
type OverContext struct {
	ContextTokens int    `json:"context_tokens"`
	Source        string `json:"source"` // where the context length was read
	// Skipped is workload.skip_over_context: the turns over the context and
	// the rest of their conversations were not sent.
	Skipped bool              `json:"skipped"`
	Tiers   []OverContextTier `json:"tiers"`
}

// OverContextTier is one tier's count of turns over the context.
type OverContextTier struct {
	Tier            string `json:"tier"`
	Turns           int    `json:"turns"`
	Over            int    `json:"over"`
	SubagentTurns   int    `json:"subagent_turns"`
	SubagentOver    int    `json:"subagent_over"`
	Dropped         int    `json:"dropped"` // turns not sent: those over and the rest of their conversations
	SubagentDropped int    `json:"subagent_dropped"`
}

// Lines says, one line per tier, how many turns were over the context and
// what became of them.
func (o OverContext) Lines() []string {
	var out []string
	for _, t := range o.Tiers {
		share := 0.0
		if t.Turns > 0 {
			share = 100 * float64(t.Over) / float64(t.Turns)
		}
		line := fmt.Sprintf("%s: %d of %d turns (%.1f%%) need more than the %d-token context (%s), %d of them subagent turns",
			t.Tier, t.Over, t.Turns, share, o.ContextTokens, o.Source, t.SubagentOver)
		if o.Skipped {
			line += fmt.Sprintf("; %d turns were dropped and never sent (%d subagent): those over the context and the rest of their conversations", t.Dropped, t.SubagentDropped)
		}
		out = append(out, line)
	}
	return out
}

// Mix is the share of each tier in a run's sessions.
type Mix struct {
	Heavy float64 `json:"heavy"`
	Light float64 `json:"light"`
}

// Kind names the mix for comparisons: "light-only" when no session is heavy,
// "heavy-only" when none is light, else "mix".
func (m Mix) Kind() string {
	switch {
	case m.Heavy <= 0 && m.Light > 0:
		return MixLightOnly
	case m.Light <= 0 && m.Heavy > 0:
		return MixHeavyOnly
	}
	return MixMixed
}

// The kinds of mix a comparison tells apart.
const (
	MixMixed     = "mix"
	MixLightOnly = "light-only"
	MixHeavyOnly = "heavy-only"
)

// Phase is one phase of a run and how it went.
type Phase struct {
	Name   string  `json:"name"`
	Status string  `json:"status"` // ok, failed, skipped
	TookS  float64 `json:"took_s"` // wall seconds
	Detail string  `json:"detail,omitempty"`
}

// Recipe is the part of the recipe a reader of the summary needs.
type Recipe struct {
	Name          string  `json:"name"`
	Engine        string  `json:"engine"`
	Nodes         int     `json:"nodes"`
	GPUsPerNode   int     `json:"gpus_per_node"`
	USDPerGPUHour float64 `json:"usd_per_gpu_hour"`
	Endpoint      string  `json:"endpoint"`
	Model         string  `json:"model"`
}

// Step is one judged step in the summary.
type Step struct {
	Sessions         int               `json:"sessions"`
	Verdict          verdict.Verdict   `json:"verdict"`
	TTFTP90          stats.Summary     `json:"ttft_p90"`
	InteractivityP90 stats.Summary     `json:"interactivity_p90"`
	ErrorRate        stats.Summary     `json:"error_rate"`
	Parts            []verdict.Part    `json:"parts"`
	Missing          []string          `json:"missing,omitempty"`
	Warnings         []string          `json:"warnings,omitempty"`
	Load             sweep.LoadSummary `json:"load"`
	Tokens           sweep.Tokens      `json:"tokens"`
	StartS           float64           `json:"start_s"` // modelled seconds since the run started; warm-up runs to MeasureStartS
	MeasureStartS    float64           `json:"measure_start_s"`
	EndS             float64           `json:"end_s"`
	Windows          int               `json:"windows"`
}

// StepOf flattens a sweep step for the summary.
func StepOf(s sweep.StepResult) Step {
	out := Step{
		Sessions: s.Sessions, Verdict: s.Judged.Verdict, Parts: s.Judged.Parts,
		Missing: s.Judged.Missing, Warnings: s.Judged.Warnings, Load: s.Load, Tokens: s.Tokens,
		StartS: s.Start, MeasureStartS: s.MeasureStart, EndS: s.End, Windows: s.Windows,
	}
	nan := stats.Summary{Center: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	out.TTFTP90, out.InteractivityP90, out.ErrorRate = nan, nan, nan
	for _, p := range s.Judged.Parts {
		switch p.Name {
		case "ttft":
			out.TTFTP90 = p.Value
		case "interactivity":
			out.InteractivityP90 = p.Value
		case "errors":
			out.ErrorRate = p.Value
		}
	}
	return out
}

// Collect fills the run-wide lists of missing signals and warnings from the
// steps, without repeats, in a stable order.
func (s *Summary) Collect(extra []string) {
	miss := map[string]bool{}
	warn := map[string]bool{}
	for _, st := range s.Steps {
		for _, m := range st.Missing {
			miss[m] = true
		}
		for _, w := range st.Warnings {
			warn[fmt.Sprintf("%d sessions: %s", st.Sessions, w)] = true
		}
	}
	for _, w := range extra {
		warn[w] = true
	}
	s.Missing, s.Warnings = keys(miss), keys(warn)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// WriteText prints the summary people read on the terminal. Its key line is
// the capacity with its interval and what limited it.
func WriteText(w io.Writer, s Summary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "recipe %s: %d x %d GPUs at $%.2f/GPU-hour; bar: P90 TTFT <= %gs, P90 interactivity >= %g tok/s/user, errors < %g%%\n",
		s.Recipe.Name, s.Recipe.Nodes, s.Recipe.GPUsPerNode, s.Recipe.USDPerGPUHour,
		s.Bar.TTFTP90, s.Bar.InteractivityP90, s.Bar.ErrorRate*100)
	b.WriteString("\n")
	writeStepTable(&b, s.Steps, false)
	b.WriteString("\n")
	for _, p := range s.Phases {
		fmt.Fprintf(&b, "phase %-12s %-8s %s\n", p.Name, p.Status, p.Detail)
	}
	if len(s.Phases) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "capacity: %s\n", s.Capacity)
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
	fmt.Fprintf(&b, "run directory: %s\n", s.RunDir)
	_, err := io.WriteString(w, b.String())
	return err
}

func costLine(c sweep.Cost) string {
	if c.USDPerSessionHour == nil {
		return fmt.Sprintf("n/a per session-hour (no step held the bar); the recipe costs $%.2f/hour", c.USDPerHour)
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
		hit := "-"
		if s.Tokens.Prompt > 0 {
			hit = fmt.Sprintf("%.0f%%", 100*s.Tokens.Cached/s.Tokens.Prompt)
		}
		rows = append(rows, []string{
			fmt.Sprint(s.Sessions), string(s.Verdict),
			fmtCI(s.TTFTP90, 2, 1), fmtCI(s.InteractivityP90, 1, 1), fmtCI(s.ErrorRate, 1, 100) + "%",
			fmt.Sprint(s.Load.Planned), fmt.Sprintf("%.2f", s.Load.InFlightPerSession), hit,
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

// Markdown renders report.md.
func Markdown(s Summary) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# headroom: %s\n\n", s.Recipe.Name)
	fmt.Fprintf(&b, "**Capacity: %s.**  \n", s.Capacity)
	fmt.Fprintf(&b, "**Cost: %s.**\n\n", costLine(s.Cost))
	if s.Target != nil {
		fmt.Fprintf(&b, "Target of %d sessions: **%s**.\n\n", s.Target.Sessions, s.Target.Verdict)
	}
	fmt.Fprintf(&b, "Recipe: %s on %d node(s) x %d GPU(s) at $%.2f per GPU-hour, model `%s` at `%s`.\n\n",
		s.Recipe.Engine, s.Recipe.Nodes, s.Recipe.GPUsPerNode, s.Recipe.USDPerGPUHour, s.Recipe.Model, s.Recipe.Endpoint)
	fmt.Fprintf(&b, "Bar: P90 TTFT <= %g s; P90 interactivity >= %g tokens/s per user; errors < %g%%. ", s.Bar.TTFTP90, s.Bar.InteractivityP90, s.Bar.ErrorRate*100)
	b.WriteString("Each value is judged from the server's metrics over the step's judged time, with a 95% bootstrap interval over windows; an interval that crosses the bar reads `too_close`.\n\n")
	b.WriteString("## Steps\n\n")
	writeStepTable(&b, s.Steps, true)
	b.WriteString("\n")
	b.WriteString("### Parts\n\n| sessions | part | verdict | value | interval | bar | margin | source |\n|---|---|---|---|---|---|---|---|\n")
	for _, st := range s.Steps {
		for _, p := range st.Parts {
			fmt.Fprintf(&b, "| %d | %s | %s | %.4g | %.4g-%.4g | %g | %+.4g | %s |\n",
				st.Sessions, p.Name, p.Verdict, p.Value.Center, p.Value.Lo, p.Value.Hi, p.Bar, p.Margin, p.Source)
		}
	}
	b.WriteString("\n## Client-side cross-checks\n\nKept for cross-checks only; the verdicts above use the server's numbers.\n\n")
	b.WriteString("| sessions | turns sent | errors seen by client | client P90 TTFT s | prompt tokens served vs planned |\n|---|---|---|---|---|\n")
	for _, st := range s.Steps {
		fmt.Fprintf(&b, "| %d | %d | %d | %.2f | %+.2f%% |\n", st.Sessions, st.Load.Sent, st.Load.ClientErrors, st.Load.ClientTTFTP90, st.Load.PromptDrift*100)
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
	if len(s.Warnings) == 0 {
		b.WriteString("None.\n")
	}
	for _, w := range s.Warnings {
		fmt.Fprintf(&b, "- %s\n", w)
	}
	fmt.Fprintf(&b, "\n## Run\n\n- stopped: %s\n- post-flight: idle=%v after %.0f s\n- started %s, %.0f s of wall time at time scale %g\n- run directory: `%s`\n",
		s.StopReason, s.PostFlight.Idle, s.PostFlight.WaitedS, s.Started, s.WallS, s.TimeScale, s.RunDir)
	return []byte(b.String())
}
