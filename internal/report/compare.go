package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
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

// Comparison is the recipes compared: what `headroom compare` prints as
// Markdown, JSON or CSV and draws as a page. Its numbers are the runs' own,
// unrounded; the text fields are what the table prints.
type Comparison struct {
	Recipes []ComparedRecipe `json:"recipes"`
	// Best is the ★ recipe: the one that holds the target at the lowest $
	// per session-hour, whose interval does not overlap the next one's.
	Best string `json:"best,omitempty"`
	// TooCloseToCall names the cheapest holder of the target and every
	// other holder whose $ per session-hour interval overlaps its: no
	// recipe is starred then.
	TooCloseToCall []string `json:"too_close_to_call,omitempty"`
	// Unranked says why no recipe is starred or called too close: the
	// runs were judged against different bars or different targets.
	Unranked string   `json:"unranked,omitempty"`
	Notes    []string `json:"notes"`

	rows []comparedRecipe
}

// ComparedRecipe is one recipe in a comparison.
type ComparedRecipe struct {
	Name  string `json:"name"`
	GPUs  int    `json:"gpus"`
	Nodes int    `json:"nodes"`
	// Capacity is the main run's; null when no step was judged.
	Capacity     *sweep.Capacity      `json:"capacity"`
	CapacityText string               `json:"capacity_text"`
	LimitedBy    string               `json:"limited_by,omitempty"`
	Target       *sweep.TargetVerdict `json:"target,omitempty"`
	USDPerHour   float64              `json:"usd_per_hour"`
	// USDPerSessionHour with its 95% interval, from the capacity interval;
	// AtMost when capacity is a floor (every step passed).
	USDPerSessionHour   *float64 `json:"usd_per_session_hour"`
	USDPerSessionHourLo *float64 `json:"usd_per_session_hour_lo,omitempty"`
	USDPerSessionHourHi *float64 `json:"usd_per_session_hour_hi,omitempty"`
	AtMost              bool     `json:"usd_per_session_hour_at_most,omitempty"`
	SessionHourText     string   `json:"usd_per_session_hour_text"`
	USDPerMillionTokens *float64 `json:"usd_per_million_tokens"`
	LightOnly           string   `json:"light_only,omitempty"`
	HeavyOnly           string   `json:"heavy_only,omitempty"`
	Best                bool     `json:"best,omitempty"`
	RunDir              string   `json:"run_dir,omitempty"`
	LightRunDir         string   `json:"light_run_dir,omitempty"`
	HeavyRunDir         string   `json:"heavy_run_dir,omitempty"`
	Ignored             []string `json:"ignored_runs,omitempty"`
}

// Compare renders the comparison across recipes as Markdown and as the
// self-contained HTML page.
func Compare(dirs []*Dir) (md, html []byte, err error) {
	c, err := CompareRuns(dirs)
	if err != nil {
		return nil, nil, err
	}
	return c.Markdown(), c.HTML(), nil
}

// CompareRuns lays out the runs of several recipes as one comparison.
//
// Runs are grouped by recipe name, in the order first given. A run whose
// summary (or config.yaml) records a mix with no heavy sessions fills the
// recipe's light-only column, one with no light sessions its heavy-only
// column; any other run, or one with no recorded mix, is the recipe's main
// row. A run that swept several mixes (Summary.Mixes) fills the columns of
// its light-only and heavy-only ladders too. When two runs fill the same
// place, the one started later is used.
func CompareRuns(dirs []*Dir) (Comparison, error) {
	if len(dirs) == 0 {
		return Comparison{}, fmt.Errorf("compare needs at least one run directory")
	}
	var order []string
	byName := map[string]*comparedRecipe{}
	place := func(s Summary) {
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
			return
		}
		*slot = &s
	}
	for _, d := range dirs {
		s, err := loadSummary(d)
		if err != nil {
			return Comparison{}, err
		}
		if s.RunDir == "" {
			s.RunDir = d.Path()
		}
		place(s)
		for _, m := range s.Mixes {
			if k := m.Mix.Kind(); k == MixLightOnly || k == MixHeavyOnly {
				place(m.AsSummary(s))
			}
		}
	}
	rows := make([]comparedRecipe, 0, len(order))
	for _, n := range order {
		rows = append(rows, *byName[n])
	}
	return buildComparison(rows), nil
}

// cents rounds to what the table prints, so what is called too close is
// what the reader sees overlap.
func cents(v float64) float64 { return math.Round(v*100) / 100 }

// costRange is a recipe's $ per session-hour interval as printed; a cost
// that is a ceiling reaches down to 0.
func costRange(r ComparedRecipe) (lo, hi float64) {
	v := *r.USDPerSessionHour
	lo, hi = v, v
	if r.USDPerSessionHourLo != nil {
		lo = *r.USDPerSessionHourLo
	}
	if r.USDPerSessionHourHi != nil {
		hi = *r.USDPerSessionHourHi
	}
	if r.AtMost {
		lo, hi = 0, v
	}
	return cents(lo), cents(hi)
}

func buildComparison(rows []comparedRecipe) Comparison {
	out := Comparison{rows: rows}
	for _, r := range rows {
		a := r.any()
		cr := ComparedRecipe{Name: r.name, GPUs: a.Recipe.Nodes * a.Recipe.GPUsPerNode, Nodes: a.Recipe.Nodes,
			CapacityText: "–", SessionHourText: "–", LightOnly: singleKind(r.light), HeavyOnly: singleKind(r.heavy), Ignored: r.ignored}
		if r.light != nil {
			cr.LightRunDir = r.light.RunDir
		}
		if r.heavy != nil {
			cr.HeavyRunDir = r.heavy.RunDir
		}
		if s := r.main; s != nil {
			cr.RunDir, cr.Target, cr.USDPerHour = s.RunDir, s.Target, s.Cost.USDPerHour
			if len(s.Steps) > 0 {
				c := s.Capacity
				cr.Capacity, cr.LimitedBy = &c, c.LimitedBy
			}
			cr.CapacityText = compareCapacity(*s)
			cr.USDPerSessionHour, cr.USDPerSessionHourLo, cr.USDPerSessionHourHi, cr.AtMost = s.Cost.USDPerSessionHour, s.Cost.USDPerSessionHourLo, s.Cost.USDPerSessionHourHi, s.Cost.AtMost
			cr.SessionHourText = compareSessionHour(cr)
			cr.USDPerMillionTokens = s.Cost.USDPerMillionTokens
		}
		out.Recipes = append(out.Recipes, cr)
	}

	// ★ the recipe that holds the target at the lowest $ per session-hour,
	// unless the next holder's interval overlaps its interval, and never
	// among runs judged against different bars or targets
	out.Unranked = unranked(rows)
	var holders []int
	for i, r := range out.Recipes {
		if out.Unranked == "" && r.Target != nil && r.Target.Verdict == verdict.Pass && r.USDPerSessionHour != nil && (r.Capacity == nil || !r.Capacity.NotEstablished) {
			holders = append(holders, i)
		}
	}
	sort.SliceStable(holders, func(a, b int) bool {
		return *out.Recipes[holders[a]].USDPerSessionHour < *out.Recipes[holders[b]].USDPerSessionHour
	})
	if len(holders) > 0 {
		best := out.Recipes[holders[0]]
		_, bestHi := costRange(best)
		close := []string{best.Name}
		for _, i := range holders[1:] {
			if lo, _ := costRange(out.Recipes[i]); lo < bestHi {
				close = append(close, out.Recipes[i].Name)
			}
		}
		if len(close) > 1 {
			out.TooCloseToCall = close
		} else {
			out.Best = best.Name
			out.Recipes[holders[0]].Best = true
		}
	}
	out.Notes = compareNotes(out)
	return out
}

// unranked says why the main runs cannot be ranked against each other:
// different bars, or different targets; empty when they can.
func unranked(rows []comparedRecipe) string {
	bars, targets := map[string]bool{}, map[int]bool{}
	for _, r := range rows {
		if s := r.main; s != nil {
			bars[barWords(s.Bar)] = true
			if s.Target != nil {
				targets[s.Target.Sessions] = true
			}
		}
	}
	switch {
	case len(bars) > 1:
		return "the runs were judged against different bars"
	case len(targets) > 1:
		return "the runs were judged against different targets"
	}
	return ""
}

func compareNotes(c Comparison) []string {
	bars := map[string]bool{}
	for _, r := range c.rows {
		for _, s := range []*Summary{r.main, r.light, r.heavy} {
			if s != nil {
				bars[barWords(s.Bar)] = true
			}
		}
	}
	var notes []string
	if len(bars) > 1 {
		notes = append(notes, "These runs were judged against different bars, so their capacities do not compare directly: re-judge them under one bar with `headroom judge` first.")
	} else {
		for b := range bars {
			notes = append(notes, "The bar: "+b+".")
		}
	}
	notes = append(notes,
		"Sessions at the bar: the most concurrent sessions each recipe held on its mix, with the 95% interval, each printed to the same tenth of a session; ≥ means no part crossed the bar at any step (every step passed, or was too close only on few turns that the steps above settled) and the ceiling was not reached; not established means no step held the bar, so no capacity or price is stated; nothing is extrapolated past the steps that ran.",
		"Target: ✓ the whole capacity interval is at or above the target, ✗ it is below, too close means the interval touches the target.",
		"$/session-hour is the recipe's hourly price divided by the sessions it held, with the 95% interval from the capacity interval (≤ when the ceiling was not reached); $/M tokens counts cached input, uncached input and output tokens at the last step that passed.",
		"Light-only and heavy-only come from runs (or a run's ladders) of the same recipe whose mix had no heavy (or no light) sessions: they run from the last step that passed to the first that did not; < means even the first step missed; blank means no such run was given.",
	)
	switch {
	case c.Unranked != "":
		notes = append(notes, "No recipe is starred: "+c.Unranked+", so holding one target at a lower price does not rank one recipe above another; re-judge them under one bar and target with `headroom judge` first.")
	case c.Best != "":
		notes = append(notes, "★ marks the recipe that holds the target at the lowest $ per session-hour, clear of the next one's interval.")
	case len(c.TooCloseToCall) > 1:
		var parts []string
		for _, n := range c.TooCloseToCall {
			for _, r := range c.Recipes {
				if r.Name == n {
					parts = append(parts, fmt.Sprintf("%s ($%s per session-hour)", n, r.SessionHourText))
				}
			}
		}
		notes = append(notes, "Too close to call: "+strings.Join(parts, " and ")+" hold the target at $ per session-hour intervals that overlap, so no recipe is starred.")
	}
	for i, r := range c.rows {
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
		if len(c.Recipes[i].Ignored) > 0 {
			note += fmt.Sprintf(" Older runs not used: `%s`.", strings.Join(c.Recipes[i].Ignored, "`, `"))
		}
		notes = append(notes, note)
	}
	return notes
}

// tableHead is the comparison table's header, as the reference lays it out.
func (c Comparison) tableHead() []string {
	targets := map[int]bool{}
	for _, r := range c.Recipes {
		if r.Target != nil {
			targets[r.Target.Sessions] = true
		}
	}
	head := "Target"
	if len(targets) == 1 {
		for k := range targets {
			head = fmt.Sprintf("Target %d", k)
		}
	}
	return []string{"Recipe", "GPUs", "Sessions at the bar (95% interval)", "Limited by", head, "$/session-hour (95% interval)", "$/M tokens", "Light-only", "Heavy-only"}
}

// tableRows are the table's cells.
func (c Comparison) tableRows() [][]string {
	oneTarget := strings.HasPrefix(c.tableHead()[4], "Target ")
	var out [][]string
	for _, r := range c.Recipes {
		name := r.Name
		if r.Best {
			name = "★ " + name
		}
		mt := "–"
		if r.USDPerMillionTokens != nil {
			mt = fmt.Sprintf("%.2f", *r.USDPerMillionTokens)
		}
		lim, target := "–", "–"
		if r.RunDir != "" {
			lim = limitedBy(r.LimitedBy)
			if r.Capacity == nil {
				lim = "–"
			}
			target = targetMark(r.Target, !oneTarget)
		}
		out = append(out, []string{name, gpusCell(r.GPUs, "not stated"), r.CapacityText, lim, target, r.SessionHourText, mt, r.LightOnly, r.HeavyOnly})
	}
	return out
}

// Markdown is the comparison table with its notes.
func (c Comparison) Markdown() []byte {
	var b strings.Builder
	b.WriteString("# headroom: recipes compared\n\n")
	b.WriteString("| " + strings.Join(c.tableHead(), " | ") + " |\n")
	b.WriteString("|---|---:|---|---|---|---:|---:|---|---|\n")
	for _, r := range c.tableRows() {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	b.WriteString("\n")
	for _, n := range c.Notes {
		b.WriteString("- " + n + "\n")
	}
	return []byte(b.String())
}

// JSON is the comparison as `headroom compare --json` prints it.
func (c Comparison) JSON() ([]byte, error) {
	doc := struct {
		Version int `json:"version"`
		Comparison
	}{1, c}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the comparison: %w", err)
	}
	return append(b, '\n'), nil
}

// CSV is one row per recipe, its numbers unrounded and its text as the
// table prints it.
func (c Comparison) CSV() []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write([]string{"recipe", "gpus", "nodes", "sessions", "sessions_lo", "sessions_hi", "sessions_at_least", "below_first_step", "sessions_text",
		"limited_by", "target_sessions", "target_verdict", "usd_per_hour", "usd_per_session_hour", "usd_per_session_hour_lo", "usd_per_session_hour_hi",
		"usd_per_session_hour_at_most", "usd_per_million_tokens", "light_only", "heavy_only", "best", "too_close_to_call", "run_dir", "not_established"})
	ptr := func(p *float64) string {
		if p == nil {
			return ""
		}
		return csvNum(*p)
	}
	for _, r := range c.Recipes {
		row := []string{r.Name, gpusCell(r.GPUs, ""), gpusCell(r.Nodes, "")}
		if cp := r.Capacity; cp != nil {
			row = append(row, csvNum(cp.Sessions), csvNum(cp.Lo), csvNum(cp.Hi), fmt.Sprint(cp.AtLeast), fmt.Sprint(cp.BelowFirst))
		} else {
			row = append(row, "", "", "", "", "")
		}
		ts, tv := "", ""
		if r.Target != nil {
			ts, tv = fmt.Sprint(r.Target.Sessions), string(r.Target.Verdict)
		}
		tc := false
		for _, n := range c.TooCloseToCall {
			tc = tc || n == r.Name
		}
		row = append(row, r.CapacityText, r.LimitedBy, ts, tv, csvNum(r.USDPerHour), ptr(r.USDPerSessionHour), ptr(r.USDPerSessionHourLo), ptr(r.USDPerSessionHourHi),
			fmt.Sprint(r.AtMost), ptr(r.USDPerMillionTokens), r.LightOnly, r.HeavyOnly, fmt.Sprint(r.Best), fmt.Sprint(tc), r.RunDir, fmt.Sprint(r.Capacity != nil && r.Capacity.NotEstablished))
		_ = w.Write(row)
	}
	w.Flush()
	return b.Bytes()
}

func barWords(b verdict.Bar) string {
	return fmt.Sprintf("P90 TTFT ≤ %s s, P90 interactivity ≥ %s tokens/s per user, errors < %s%%", num(b.TTFTP90), num(b.InteractivityP90), num(b.ErrorRate*100))
}

// compareCapacity is the capacity as the table prints it: the centre to
// the same tenth of a session as its interval, so the centre never reads
// outside the bounds printed beside it.
func compareCapacity(s Summary) string {
	c := s.Capacity
	switch {
	case len(s.Steps) == 0 && c.Sessions == 0:
		return "no data"
	case c.AtLeast:
		return "≥ " + num1(round1(c.Sessions))
	case c.BelowFirst:
		return "< " + fmt.Sprint(firstStep(s))
	case c.NotEstablished && strings.HasPrefix(c.LimitedBy, "no data"):
		return "no data"
	case c.NotEstablished:
		return fmt.Sprintf("not established (none held; %d missed)", c.Bracket[1])
	}
	center, lo, hi := round1(c.Sessions), round1(c.Lo), round1(c.Hi)
	if lo == center && hi == center {
		return "≈ " + num1(center)
	}
	c.Lo, c.Hi = lo, hi
	return fmt.Sprintf("≈ %s (%s–%s)", num1(center), num1(lo), hiWords(c))
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

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

// gpusCell is a recipe's GPUs (or nodes) in the table, or none where the
// run stated none (a real endpoint given no --gpus): never a 0 nobody gave.
func gpusCell(n int, none string) string {
	if n <= 0 {
		return none
	}
	return fmt.Sprint(n)
}

// compareSessionHour is the $ per session-hour with its interval, in the
// cents the too-close rule reads.
func compareSessionHour(r ComparedRecipe) string {
	if r.USDPerHour == 0 {
		return "not priced"
	}
	if r.USDPerSessionHour == nil {
		return "n/a"
	}
	v := *r.USDPerSessionHour
	if r.AtMost {
		return fmt.Sprintf("≤ %.2f", v)
	}
	lo, hi := costRange(r)
	if lo == cents(v) && hi == cents(v) {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", v, lo, hi)
}
