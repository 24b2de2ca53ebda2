package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
)

// WriteText prints the summary people read on the terminal. Its key line is
// the capacity with its interval and what limited it; the warnings come
// grouped by cause, a handful at most (WriteTextAll prints every one).
func WriteText(w io.Writer, s Summary) error { return writeText(w, s, false) }

// WriteTextAll is WriteText with every warning on a line of its own, step
// by step: `headroom run --verbose`, and the reports that hold every line.
func WriteTextAll(w io.Writer, s Summary) error { return writeText(w, s, true) }

func writeText(w io.Writer, s Summary, verbose bool) error {
	var b strings.Builder
	gpus := "GPUs not stated"
	if s.Recipe.GPUsStated() {
		gpus = fmt.Sprintf("%d x %d GPUs", s.Recipe.Nodes, s.Recipe.GPUsPerNode)
	}
	price := fmt.Sprintf(" at $%.2f/GPU-hour", s.Recipe.USDPerGPUHour)
	if s.Recipe.USDPerGPUHour == 0 {
		price = ", not priced"
	}
	fmt.Fprintf(&b, "recipe %s: %s%s; bar: P90 TTFT <= %gs, P90 interactivity >= %g tok/s/user, errors < %g%%\n",
		s.Recipe.Name, gpus, price,
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
	if s.Blocked != "" {
		fmt.Fprintf(&b, "blocked: %s: the recipe fails whatever its capacity\n", s.Blocked)
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
	writeWarnings(&b, s, verbose)
	if s.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", s.Error)
	}
	fmt.Fprintf(&b, "run directory: %s\n", s.RunDir)
	_, err := io.WriteString(w, b.String())
	return err
}

// GPUsStated reports whether the recipe names the GPUs it runs on. A run
// against a real endpoint given no --gpus (nodes and gpus_per_node 0) does
// not, and the reports say "GPUs not stated", never a count nobody gave.
func (r Recipe) GPUsStated() bool { return r.Nodes > 0 && r.GPUsPerNode > 0 }

// hardwarePhrase is how report.md and report.html state a recipe's GPUs and
// price: "on 2 node(s) x 8 GPU(s) at $1.80 per GPU-hour" (times is the sign
// between nodes and GPUs), or "with GPUs not stated, not priced".
func hardwarePhrase(r Recipe, times string) string {
	if !r.GPUsStated() {
		return "with GPUs not stated, " + pricePhrase(r.USDPerGPUHour)
	}
	return fmt.Sprintf("on %d node(s) %s %d GPU(s) %s", r.Nodes, times, r.GPUsPerNode, pricePhrase(r.USDPerGPUHour))
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
	if s.Blocked != "" {
		out += "; blocked: " + s.Blocked
	}
	if s.StopReason != "" {
		out += "; " + s.StopReason
	}
	return out
}

func costLine(c sweep.Cost) string {
	if c.USDPerHour == 0 {
		return "not priced (--gpus and --usd-per-gpu-hour, or recipe.nodes, recipe.gpus_per_node and recipe.usd_per_gpu_hour, give the GPUs and the price of a GPU-hour)"
	}
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

// maxWarnings is how many causes of warnings the terminal shows.
const maxWarnings = 5

// stepWarning is one warning of one step: step is its number in the run
// (1 for the first), 0 for a warning about the run as a whole.
type stepWarning struct {
	step, sessions int
	text           string
}

// writeWarnings prints the run's warnings. Verbose: every line, the run's
// own first, then step by step in step order. Otherwise each cause once
// with the steps and sessions it touches ("errors: few turns: steps 1, 3
// (4, 12 sessions)"), in the order of the first step it touches, at most
// maxWarnings of them, and a line saying how many more there are.
func writeWarnings(b *strings.Builder, s Summary, verbose bool) {
	var all []stepWarning
	fromSteps := map[string]bool{}
	for i, st := range s.Steps {
		for _, w := range st.AllWarnings() {
			all = append(all, stepWarning{i + 1, st.Sessions, w})
			fromSteps[fmt.Sprintf("%d sessions: %s", st.Sessions, w)] = true
		}
	}
	var runWide []stepWarning
	for _, w := range s.Warnings {
		if !fromSteps[w] {
			runWide = append(runWide, stepWarning{text: w})
		}
	}
	all = append(runWide, all...)
	if verbose {
		for _, w := range all {
			if w.step == 0 {
				fmt.Fprintf(b, "warning: %s\n", w.text)
			} else {
				fmt.Fprintf(b, "warning: step %d (%d sessions): %s\n", w.step, w.sessions, w.text)
			}
		}
		return
	}
	type group struct {
		label, masked string
		same          bool
		steps         []int
		sessions      []int
		lines         int
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, w := range all {
		label := warningCause(w.text)
		if w.step == 0 {
			label = w.text // the run's own warnings are one of a kind
		}
		key := maskDigits(label, "#")
		g := byKey[key]
		if g == nil {
			g = &group{label: label, masked: maskDigits(label, "N"), same: true}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.same = g.same && g.label == label
		g.lines++
		if w.step != 0 {
			if !slices.Contains(g.steps, w.step) {
				g.steps = append(g.steps, w.step)
			}
			if !slices.Contains(g.sessions, w.sessions) {
				g.sessions = append(g.sessions, w.sessions)
			}
		}
	}
	first := func(g *group) int {
		if len(g.steps) == 0 {
			return 0
		}
		return slices.Min(g.steps)
	}
	sort.SliceStable(groups, func(i, j int) bool { return first(groups[i]) < first(groups[j]) })
	for i, g := range groups {
		if i == maxWarnings {
			more := 0
			for _, rest := range groups[i:] {
				more += rest.lines
			}
			causes := "causes"
			if len(groups)-i == 1 {
				causes = "cause"
			}
			fmt.Fprintf(b, "warning: %d more %s (%d lines): --verbose prints every warning, and report.md lists them all\n", len(groups)-i, causes, more)
			break
		}
		label := g.label
		if !g.same {
			label = g.masked
		}
		if len(g.steps) == 0 {
			fmt.Fprintf(b, "warning: %s\n", label)
			continue
		}
		slices.Sort(g.steps)
		slices.Sort(g.sessions)
		fmt.Fprintf(b, "warning: %s: %s %s (%s sessions)\n", label, plural(len(g.steps), "step", "steps"), joinInts(g.steps), joinInts(g.sessions))
	}
}

// warningCause is a warning's cause without its figures' explanation: the
// part it names, if any ("errors: "), then its first clause, cut before a
// parenthesis or a semicolon.
func warningCause(w string) string {
	prefix := ""
	if head, rest, ok := strings.Cut(w, ": "); ok && head != "" && !strings.ContainsAny(head, " (") {
		prefix, w = head+": ", rest
	}
	if head, _, ok := strings.Cut(w, ": "); ok {
		w = head
	}
	for _, sep := range []string{" (", "; "} {
		if head, _, ok := strings.Cut(w, sep); ok {
			w = head
		}
	}
	return prefix + w
}

// maskDigits replaces each run of digits (with its decimal point) by with.
func maskDigits(s, with string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		if r >= '0' && r <= '9' || in && r == '.' {
			if !in {
				b.WriteString(with)
			}
			in = true
			continue
		}
		in = false
		b.WriteRune(r)
	}
	return b.String()
}

func joinInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
