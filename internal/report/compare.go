package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// comparedRecipe is one row of the comparison: a recipe's run on its mix
// and, where they were run, its light-only and heavy-only runs.
type comparedRecipe struct {
	name         string
	main         *Summary // the run on a mix of tiers, or whose mix is not recorded
	light, heavy *Summary
	ignored      []string // older runs of the same recipe and kind
}

func (c comparedRecipe) any() *Summary {
	for _, s := range []*Summary{c.main, c.light, c.heavy} {
		if s != nil {
			return s
		}
	}
	return nil
}

// Compare renders the comparison across recipes, as Markdown and as a
// self-contained HTML page with charts of sessions per node and per dollar.
//
// Runs are grouped by recipe name, in the order first given. A run whose
// summary (or config.yaml) records a mix with no heavy sessions fills the
// recipe's light-only column, one with no light sessions its heavy-only
// column; any other run, or one with no recorded mix, is the recipe's main
// row. When two runs fill the same place, the one started later is used.
func Compare(dirs []*Dir) (md, html []byte, err error) {
	if len(dirs) == 0 {
		return nil, nil, fmt.Errorf("compare needs at least one run directory")
	}
	var order []string
	byName := map[string]*comparedRecipe{}
	for _, d := range dirs {
		s, err := loadSummary(d)
		if err != nil {
			return nil, nil, err
		}
		if s.RunDir == "" {
			s.RunDir = d.Path()
		}
		c := byName[s.Recipe.Name]
		if c == nil {
			c = &comparedRecipe{name: s.Recipe.Name}
			byName[s.Recipe.Name] = c
			order = append(order, s.Recipe.Name)
		}
		slot := &c.main
		if s.Mix != nil {
			switch s.Mix.Kind() {
			case MixLightOnly:
				slot = &c.light
			case MixHeavyOnly:
				slot = &c.heavy
			}
		}
		if *slot != nil {
			older, newer := *slot, &s
			if s.Started < (*slot).Started {
				older, newer = &s, *slot
			}
			c.ignored = append(c.ignored, older.RunDir)
			*slot = newer
			continue
		}
		ss := s
		*slot = &ss
	}
	rows := make([]comparedRecipe, 0, len(order))
	for _, n := range order {
		rows = append(rows, *byName[n])
	}
	return compareMarkdown(rows), compareHTML(rows), nil
}

// comparisonTable is the table's cells, shared by Markdown and HTML.
type comparisonTable struct {
	head  []string
	rows  [][]string
	best  int               // index of the ★ row, -1 for none
	notes []string          // what the reader needs to read the table
	bars  map[string]string // distinct bars, for a warning
}

func buildTable(rows []comparedRecipe) comparisonTable {
	t := comparisonTable{best: -1, bars: map[string]string{}}
	targets := map[int]bool{}
	for _, r := range rows {
		if r.main != nil && r.main.Target != nil {
			targets[r.main.Target.Sessions] = true
		}
		for _, s := range []*Summary{r.main, r.light, r.heavy} {
			if s != nil {
				t.bars[barWords(s.Bar)] = s.Recipe.Name
			}
		}
	}
	targetHead := "Target"
	oneTarget := 0
	if len(targets) == 1 {
		for k := range targets {
			oneTarget = k
		}
		targetHead = fmt.Sprintf("Target %d", oneTarget)
	}
	t.head = []string{"Recipe", "GPUs", "Sessions at the bar (95% interval)", "Limited by", targetHead, "$/session-hour", "$/M tokens", "Light-only", "Heavy-only"}

	// ★ the recipe that holds the target at the lowest $ per session-hour
	bestCost := math.Inf(1)
	for i, r := range rows {
		if s := r.main; s != nil && s.Target != nil && s.Target.Verdict == verdict.Pass && s.Cost.USDPerSessionHour != nil && *s.Cost.USDPerSessionHour < bestCost {
			bestCost, t.best = *s.Cost.USDPerSessionHour, i
		}
	}
	for i, r := range rows {
		any := r.any()
		name := r.name
		if i == t.best {
			name = "★ " + name
		}
		cells := []string{name, fmt.Sprint(any.Recipe.Nodes * any.Recipe.GPUsPerNode), "–", "–", "–", "–", "–", singleKind(r.light), singleKind(r.heavy)}
		if s := r.main; s != nil {
			cells[2] = compareCapacity(*s)
			cells[3] = limitedBy(s.Capacity.LimitedBy)
			cells[4] = targetMark(s.Target, oneTarget == 0)
			cells[5] = compareSessionHour(s)
			if s.Cost.USDPerMillionTokens != nil {
				cells[6] = fmt.Sprintf("%.2f", *s.Cost.USDPerMillionTokens)
			}
		}
		t.rows = append(t.rows, cells)
	}
	if len(t.bars) > 1 {
		t.notes = append(t.notes, "These runs were judged against different bars, so their capacities do not compare directly: re-judge them under one bar with `headroom judge` first.")
	} else {
		for b := range t.bars {
			t.notes = append(t.notes, "The bar: "+b+".")
		}
	}
	t.notes = append(t.notes,
		"Sessions at the bar: the most concurrent sessions each recipe held on its mix, with the 95% interval; ≥ means every step passed and the ceiling was not reached; nothing is extrapolated past the steps that ran.",
		"Target: ✓ the whole capacity interval is at or above the target, ✗ it is below, too close means the interval touches the target.",
		"$/session-hour is the recipe's hourly price divided by the sessions it held (≤ when the ceiling was not reached); $/M tokens counts cached input, uncached input and output tokens at the last step that passed.",
		"Light-only and heavy-only come from runs of the same recipe whose mix had no heavy (or no light) sessions: they run from the last step that passed to the first that did not; < means even the first step missed; blank means no such run was given.",
	)
	if t.best >= 0 {
		t.notes = append(t.notes, "★ marks the recipe that holds the target at the lowest $ per session-hour.")
	}
	for _, r := range rows {
		var used []string
		for _, x := range []struct {
			what string
			s    *Summary
		}{{"mix", r.main}, {"light-only", r.light}, {"heavy-only", r.heavy}} {
			if x.s != nil {
				used = append(used, fmt.Sprintf("%s `%s`", x.what, x.s.RunDir))
			}
		}
		note := fmt.Sprintf("%s: %s.", r.name, strings.Join(used, ", "))
		if len(r.ignored) > 0 {
			note += fmt.Sprintf(" Older runs not used: `%s`.", strings.Join(r.ignored, "`, `"))
		}
		t.notes = append(t.notes, note)
	}
	return t
}

func barWords(b verdict.Bar) string {
	return fmt.Sprintf("P90 TTFT ≤ %s s, P90 interactivity ≥ %s tokens/s per user, errors < %s%%", num(b.TTFTP90), num(b.InteractivityP90), num(b.ErrorRate*100))
}

func compareCapacity(s Summary) string {
	c := s.Capacity
	switch {
	case len(s.Steps) == 0 && c.Sessions == 0:
		return "no data"
	case c.AtLeast:
		return "≥ " + num1(c.Sessions)
	case c.BelowFirst:
		return "< " + fmt.Sprint(firstStep(s))
	}
	center := "≈ " + fmt.Sprintf("%.0f", c.Sessions)
	if c.Lo == c.Sessions && c.Hi == c.Sessions {
		return center
	}
	return fmt.Sprintf("%s (%s–%s)", center, num1(c.Lo), hiWords(c))
}

func firstStep(s Summary) int {
	first := 0
	for i, st := range s.Steps {
		if i == 0 || st.Sessions < first {
			first = st.Sessions
		}
	}
	return first
}

// singleKind is a light-only or heavy-only run's capacity as the reference
// report gives it: from the last step that passed to the first that did not.
func singleKind(s *Summary) string {
	if s == nil {
		return ""
	}
	steps := append([]Step(nil), s.Steps...)
	if len(steps) == 0 {
		return "no data"
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Sessions < steps[j].Sessions })
	lastPass := -1
	for _, st := range steps {
		if st.Verdict != verdict.Pass {
			if lastPass < 0 {
				return fmt.Sprintf("< %d", st.Sessions)
			}
			if lastPass == st.Sessions { // a repeat of a passing step did not pass
				return fmt.Sprintf("≈ %d", st.Sessions)
			}
			return fmt.Sprintf("%d–%d", lastPass, st.Sessions)
		}
		lastPass = st.Sessions
	}
	return fmt.Sprintf("≥ %d", lastPass)
}

func limitedBy(s string) string {
	if s == "ttft" {
		return "TTFT"
	}
	return s
}

// targetMark is the target column: ✓, ✗, too close or no data, with the
// target's sessions when the recipes were given different targets.
func targetMark(t *sweep.TargetVerdict, withSessions bool) string {
	if t == nil {
		return "–"
	}
	out := map[verdict.Verdict]string{verdict.Pass: "✓", verdict.Fail: "✗", verdict.TooClose: "too close", verdict.NoData: "no data"}[t.Verdict]
	if out == "" {
		out = string(t.Verdict)
	}
	if withSessions {
		out += fmt.Sprintf(" (%d)", t.Sessions)
	}
	return out
}

func compareSessionHour(s *Summary) string {
	c := s.Cost
	if c.USDPerSessionHour == nil {
		return "n/a"
	}
	if c.AtMost {
		return fmt.Sprintf("≤ %.2f", *c.USDPerSessionHour)
	}
	return fmt.Sprintf("%.2f", *c.USDPerSessionHour)
}

func compareMarkdown(rows []comparedRecipe) []byte {
	t := buildTable(rows)
	var b strings.Builder
	b.WriteString("# headroom: recipes compared\n\n")
	b.WriteString("| " + strings.Join(t.head, " | ") + " |\n")
	b.WriteString("|---|" + strings.Repeat("---:|", 1) + strings.Repeat("---|", 3) + strings.Repeat("---:|", 2) + strings.Repeat("---|", 2) + "\n")
	for _, r := range t.rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	b.WriteString("\n")
	for _, n := range t.notes {
		b.WriteString("- " + n + "\n")
	}
	return []byte(b.String())
}
