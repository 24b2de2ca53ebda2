package fidelity

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// Status is how a simulated cell stands against the published one.
type Status string

// The statuses a cell can have.
const (
	Held        Status = "held"        // within the tolerance
	Missed      Status = "missed"      // outside it
	Unreachable Status = "unreachable" // outside it, and the model cannot reach it (Why says why)
	// Draw is outside it on this one sweep while the model reaches it across
	// independent sweeps (Why gives the evidence): a point estimate of one
	// run, as the report's own figures are, moves with the draw.
	Draw   Status = "draw"
	NotRun Status = "not run" // the sweep it needs was not run or ended in a rig error
)

// Columns of the table, as the report's results table names them, and the
// report's claims beside it.
const (
	ColCapacity    = "capacity"
	ColLimit       = "limit"
	ColTarget      = "target"
	ColStress      = "stress"
	ColSessionHour = "usd_per_session_hour"
	ColMTok        = "usd_per_mtok"
	ColLight       = "light"
	ColHeavy       = "heavy"
	ColKVPeak      = "kv_peak"
	ColInFlight    = "in_flight"
	ColOrdering    = "ordering"
	ColErrors128K  = "128k_errors"
	ColPDLight     = "pd_light"
	ColHostCache   = "host_cache"
	ColLightHeavy  = "light_over_heavy"
)

// Cell is one published figure beside its simulated value.
type Cell struct {
	// Recipe is the recipe the cell belongs to; -1 for a claim across recipes.
	Recipe    int    `json:"recipe"`
	Column    string `json:"column"`
	Published string `json:"published"`
	Simulated string `json:"simulated"`
	// Tolerance says what holding the cell means.
	Tolerance string `json:"tolerance"`
	Status    Status `json:"status"`
	// Why explains a cell that is not held: the model's limit, or what missed.
	Why string `json:"why,omitempty"`
	// Headline marks the cells issue 13 lists (the test checks them).
	Headline bool `json:"headline"`
}

// OK reports whether the cell holds.
func (c Cell) OK() bool { return c.Status == Held }

// Table is every cell of the comparison.
type Table struct {
	Cells []Cell `json:"cells"`
}

// Cell returns recipe n's cell in column col.
func (t Table) Cell(n int, col string) (Cell, bool) {
	for _, c := range t.Cells {
		if c.Recipe == n && c.Column == col {
			return c, true
		}
	}
	return Cell{}, false
}

// Headlines counts the headline cells and those that hold.
func (t Table) Headlines() (held, all int) {
	for _, c := range t.Cells {
		if c.Headline {
			all++
			if c.OK() {
				held++
			}
		}
	}
	return held, all
}

// Compare sets every published cell beside the study's simulated value and
// judges it against the tolerance issue 13 gives (capacities within the
// published interval or one ladder step of it, the same limiting part,
// $ per session-hour within 10%, $ per million tokens within 25%, and the
// report's claims); a cell that misses and that limits names (recipe and
// column) reads unreachable with the reason, or a draw where the reason
// starts with DrawPrefix.
func Compare(f File, s Study, limits map[string]string) Table {
	var t Table
	add := func(c Cell) {
		if c.Status == Missed {
			if why, ok := limits[limitKey(c.Recipe, c.Column)]; ok {
				c.Status, c.Why = Unreachable, why
				if d, ok := strings.CutPrefix(why, DrawPrefix); ok {
					c.Status, c.Why = Draw, d
				}
			}
		}
		t.Cells = append(t.Cells, c)
	}
	for _, p := range f.Recipes {
		today, okToday := s.Find(p.Recipe, Today)
		light, okLight := s.Find(p.Recipe, LightOnly)
		heavy, okHeavy := s.Find(p.Recipe, HeavyOnly)
		if p.Capacity != nil {
			add(capacityCell(p.Recipe, ColCapacity, *p.Capacity, today, okToday, true))
		}
		if p.Limit != LimitUnknown && !p.Dropped {
			add(limitCell(p, today, okToday))
		}
		if p.Target != TargetUnknown {
			add(targetCell(p, f.Bar.Target, today, okToday))
		}
		if p.Stress != "" {
			add(stressCell(p, f.Bar.Stress, today, okToday))
		}
		if p.USDPerSessionHour != nil {
			add(costCell(p.Recipe, ColSessionHour, *p.USDPerSessionHour, today, okToday, 0.10))
		}
		if p.USDPerMTok != nil {
			add(costCell(p.Recipe, ColMTok, *p.USDPerMTok, today, okToday, 0.25))
		}
		if p.Light != nil && p.Light.Bound != Words {
			add(capacityCell(p.Recipe, ColLight, *p.Light, light, okLight, true))
		}
		if p.Heavy != nil && p.Heavy.Bound != Words {
			add(capacityCell(p.Recipe, ColHeavy, *p.Heavy, heavy, okHeavy, true))
		}
		if p.KVPeak != nil {
			add(kvPeakCell(p, today, okToday))
		}
		if p.InFlight != nil && p.InFlight.AtToday != nil {
			add(inFlightCell(p, f.Baseline.Sessions, today, okToday))
		}
		if p.Recipe == 2 && p.Limit == LimitErrors {
			add(errors128K(p, today, okToday))
		}
		if p.Recipe == 4 && p.Light != nil {
			add(pdLight(p, light, okLight))
		}
		if okLight && okHeavy {
			add(lightOverHeavy(p.Recipe, light, heavy))
		}
	}
	add(ordering(s))
	add(hostCache(s, 5, 1))
	add(hostCache(s, 6, 7))
	return t
}

func limitKey(recipe int, col string) string { return fmt.Sprintf("%d/%s", recipe, col) }

// LimitKey is how a limits map names a cell.
func LimitKey(recipe int, col string) string { return limitKey(recipe, col) }

// span is a range of sessions: [Lo, Hi], Hi may be +Inf; OpenHi excludes Hi.
type span struct {
	Lo, Hi float64
	OpenHi bool
}

// publishedSpan is the sessions a published figure allows.
func publishedSpan(f Figure) span {
	switch f.Bound {
	case AtLeast:
		return span{Lo: f.Low, Hi: math.Inf(1)}
	case AtMost:
		return span{Lo: 0, Hi: f.High}
	case Below:
		return span{Lo: 0, Hi: f.High, OpenHi: true}
	case Range:
		return span{Lo: f.Low, Hi: f.High}
	}
	if f.HasInterval() {
		return span{Lo: f.Low, Hi: f.High}
	}
	return span{Lo: f.Value, Hi: f.Value}
}

// simulatedSpan is what a simulated capacity says of the sessions held: a
// point, at least the last step, or below the first.
func simulatedSpan(c sweep.Capacity, first int) span {
	switch {
	case c.AtLeast:
		return span{Lo: c.Sessions, Hi: math.Inf(1)}
	case c.BelowFirst:
		return span{Lo: 0, Hi: float64(first), OpenHi: true}
	case c.NotEstablished:
		// no step held the bar: capacity lies somewhere under its upper bound
		return span{Lo: 0, Hi: c.Hi, OpenHi: c.HiOpen}
	}
	return span{Lo: c.Sessions, Hi: c.Sessions}
}

func (a span) meets(b span) bool {
	if a.Lo > b.Hi || b.Lo > a.Hi {
		return false
	}
	if (a.OpenHi && a.Hi == b.Lo) || (b.OpenHi && b.Hi == a.Lo) {
		return false
	}
	return true
}

// ladderStep is the gap between the ladder's steps around v (the first gap
// below the ladder, the last above it).
func ladderStep(ladder []int, v float64) float64 {
	if len(ladder) < 2 {
		if len(ladder) == 1 {
			return float64(ladder[0])
		}
		return 0
	}
	for i := 1; i < len(ladder); i++ {
		if v <= float64(ladder[i]) {
			return float64(ladder[i] - ladder[i-1])
		}
	}
	return float64(ladder[len(ladder)-1] - ladder[len(ladder)-2])
}

// ladderOf is the ladder a sweep ran: its steps' sessions, in order, each once.
func ladderOf(sum report.Summary) []int {
	var out []int
	for _, st := range sum.Steps {
		if !slices.Contains(out, st.Sessions) {
			out = append(out, st.Sessions)
		}
	}
	slices.Sort(out)
	return out
}

// notRun is a cell whose sweep is missing or broke.
func notRun(c Cell, w Sweep, ok bool) (Cell, bool) {
	switch {
	case !ok:
		c.Status, c.Simulated, c.Why = NotRun, "not run", "the study did not run this sweep"
		return c, true
	case w.Err != "" && len(w.Summary.Steps) == 0:
		c.Status, c.Simulated, c.Why = NotRun, "rig error", w.Err
		return c, true
	}
	return c, false
}

func capacityCell(n int, col string, f Figure, w Sweep, ok, headline bool) Cell {
	c := Cell{Recipe: n, Column: col, Published: f.Text, Headline: headline,
		Tolerance: "within the published interval or one ladder step of it"}
	if c, done := notRun(c, w, ok); done {
		return c
	}
	ladder := ladderOf(w.Summary)
	pub := publishedSpan(f)
	ref := pub.Lo
	if math.IsInf(pub.Hi, 1) || pub.Hi == 0 {
		ref = math.Max(pub.Lo, pub.Hi)
	}
	step := ladderStep(ladder, ref)
	wide := span{Lo: pub.Lo - step, Hi: pub.Hi + step, OpenHi: pub.OpenHi}
	c.Tolerance = fmt.Sprintf("within %s ± one ladder step (%g sessions)", spanWords(pub), step)
	c.Simulated = capacityWords(w)
	first := 0
	if len(ladder) > 0 {
		first = ladder[0]
	}
	if simulatedSpan(w.Summary.Capacity, first).meets(wide) && hasCapacity(w.Summary.Capacity) {
		c.Status = Held
	} else {
		c.Status = Missed
	}
	return c
}

// hasCapacity reports whether the sweep measured a capacity (not no data).
func hasCapacity(c sweep.Capacity) bool {
	return !strings.HasPrefix(c.LimitedBy, "no data") && c.LimitedBy != "unknown"
}

func spanWords(s span) string {
	switch {
	case math.IsInf(s.Hi, 1):
		return fmt.Sprintf("[%g, ∞)", s.Lo)
	case s.OpenHi:
		return fmt.Sprintf("[%g, %g)", s.Lo, s.Hi)
	case s.Lo == s.Hi:
		return fmt.Sprintf("%g", s.Lo)
	}
	return fmt.Sprintf("[%g, %g]", s.Lo, s.Hi)
}

// capacityWords is a sweep's capacity as the table prints it.
func capacityWords(w Sweep) string {
	if w.Err != "" && len(w.Summary.Steps) == 0 {
		return "rig error: " + firstLine(w.Err)
	}
	c := w.Summary.Capacity
	limit := limitWords(c.LimitedBy)
	switch {
	case len(w.Summary.Steps) == 0:
		return "not measured"
	case c.AtLeast:
		return fmt.Sprintf("≥ %g (%s)", c.Sessions, limit)
	case c.BelowFirst:
		return fmt.Sprintf("< %d (%s)", w.Summary.Steps[0].Sessions, limit)
	case c.NotEstablished:
		return fmt.Sprintf("not established (no step held; 0–%.1f, %s)", c.Hi, limit)
	}
	return fmt.Sprintf("%.1f (%.1f–%.1f, %s)", c.Sessions, c.Lo, c.Hi, limit)
}

func limitWords(s string) string {
	switch s {
	case verdict.PartTTFT:
		return "TTFT"
	case "not reached":
		return "not reached"
	}
	return s
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// simLimit is the sweep's limiting part in the published file's words.
func simLimit(c sweep.Capacity) Limit {
	switch {
	case c.AtLeast:
		return LimitNotReached
	case c.LimitedBy == verdict.PartTTFT:
		return LimitTTFT
	case c.LimitedBy == verdict.PartInteractivity:
		return LimitInteractivity
	case c.LimitedBy == verdict.PartErrors:
		return LimitErrors
	}
	return Limit(c.LimitedBy)
}

func limitCell(p Published, w Sweep, ok bool) Cell {
	c := Cell{Recipe: p.Recipe, Column: ColLimit, Published: string(p.Limit), Headline: true, Tolerance: "the same part"}
	if p.Limit == LimitNotReached && p.Capacity != nil && p.Capacity.Bound == AtLeast {
		c.Published = fmt.Sprintf("not reached at %g", p.Capacity.Low)
		c.Tolerance = fmt.Sprintf("every step up to %g passed", p.Capacity.Low)
	}
	if c, done := notRun(c, w, ok); done {
		return c
	}
	got := simLimit(w.Summary.Capacity)
	c.Simulated = string(got)
	if got == LimitNotReached {
		c.Simulated = fmt.Sprintf("not reached at %g", w.Summary.Capacity.Sessions)
	}
	c.Status = Missed
	if got == p.Limit && (p.Limit != LimitNotReached || p.Capacity == nil || w.Summary.Capacity.Sessions >= p.Capacity.Low) {
		c.Status = Held
	}
	return c
}

func targetWords(v verdict.Verdict) Target {
	switch v {
	case verdict.Pass:
		return TargetHeld
	case verdict.Fail:
		return TargetMissed
	case verdict.TooClose:
		return TargetTooClose
	}
	return Target(v)
}

func targetCell(p Published, target int, w Sweep, ok bool) Cell {
	c := Cell{Recipe: p.Recipe, Column: ColTarget, Published: string(p.Target), Tolerance: fmt.Sprintf("the same verdict at %d sessions", target)}
	if c, done := notRun(c, w, ok); done {
		return c
	}
	if w.Summary.Target == nil {
		c.Simulated, c.Status = "no verdict", Missed
		return c
	}
	got := targetWords(w.Summary.Target.Verdict)
	c.Simulated = string(got)
	c.Status = Missed
	if got == p.Target {
		c.Status = Held
	}
	return c
}

// stressCell reads the stress step as the report words it: passed, missed
// narrowly (too close, or a fail with capacity within one ladder step of
// the stress step) or missed badly.
func stressCell(p Published, stress int, w Sweep, ok bool) Cell {
	c := Cell{Recipe: p.Recipe, Column: ColStress, Published: p.Stress,
		Tolerance: fmt.Sprintf("the same words at %d sessions: passed; missed narrowly (too close, or capacity within one ladder step); missed badly", stress)}
	if c, done := notRun(c, w, ok); done {
		return c
	}
	if w.Summary.Stress == nil {
		c.Simulated, c.Status = "no verdict", Missed
		return c
	}
	step := ladderStep(ladderOf(w.Summary), float64(stress))
	switch v := w.Summary.Stress.Verdict; {
	case v == verdict.Pass:
		c.Simulated = "passed"
	case v == verdict.TooClose || w.Summary.Capacity.Sessions >= float64(stress)-step:
		c.Simulated = "missed narrowly"
	default:
		c.Simulated = "missed badly"
	}
	c.Status = Missed
	if c.Simulated == p.Stress {
		c.Status = Held
	}
	return c
}

func costCell(n int, col string, f Figure, w Sweep, ok bool, tol float64) Cell {
	c := Cell{Recipe: n, Column: col, Published: f.Text, Headline: true}
	switch f.Bound {
	case AtMost:
		c.Tolerance = fmt.Sprintf("at most %g + %.0f%%", f.High, 100*tol)
	default:
		c.Tolerance = fmt.Sprintf("within %.0f%% of %g", 100*tol, f.Value)
	}
	if c, done := notRun(c, w, ok); done {
		return c
	}
	var v *float64
	if col == ColSessionHour {
		v = w.Summary.Cost.USDPerSessionHour
	} else {
		v = w.Summary.Cost.USDPerMillionTokens
	}
	if v == nil {
		c.Simulated, c.Status = "n/a", Missed
		if col == ColMTok {
			c.Why = "no step passed, so no step's tokens price it"
		} else {
			c.Why = "no capacity to divide the price by"
		}
		return c
	}
	c.Simulated = fmt.Sprintf("%.2f", *v)
	if col == ColSessionHour && w.Summary.Cost.AtMost {
		c.Simulated = "≤ " + c.Simulated
	}
	if col == ColMTok && w.Summary.Cost.FromStep > 0 {
		c.Simulated += fmt.Sprintf(" (at %d)", w.Summary.Cost.FromStep)
	}
	c.Status = Missed
	switch f.Bound {
	case AtMost:
		if *v <= f.High*(1+tol) {
			c.Status = Held
		}
	default:
		if math.Abs(*v-f.Value) <= tol*f.Value {
			c.Status = Held
		}
		c.Simulated += fmt.Sprintf(", %+.0f%%", 100*(*v-f.Value)/f.Value)
	}
	return c
}

// kvPeakCell reads the KV cache's use over the judged time of today's
// steps up to the sessions the report says the recipe held (its published
// capacity): the report's "it peaked under half full" explains why the
// host cache added nothing at the bar, where the recipe ran.
func kvPeakCell(p Published, w Sweep, ok bool) Cell {
	upTo := 0.0
	if p.Capacity != nil {
		upTo = math.Max(p.Capacity.Value, p.Capacity.High)
	}
	c := Cell{Recipe: p.Recipe, Column: ColKVPeak, Published: p.KVPeak.Text, Headline: true,
		Tolerance: fmt.Sprintf("the KV cache's peak use over today's judged steps up to %g sessions below %g", upTo, p.KVPeak.High)}
	if c, done := notRun(c, w, ok); done {
		return c
	}
	if len(w.StepKV) == 0 {
		c.Simulated, c.Status, c.Why = "not reported", Missed, "the mapping reads no KV cache gauge"
		return c
	}
	peak, mean, at := math.NaN(), 0.0, 0
	var above []string
	for _, u := range w.StepKV {
		if float64(u.Sessions) > upTo {
			if t := fmt.Sprintf("%.0f%% at %d", 100*u.Peak, u.Sessions); !slices.Contains(above, t) {
				above = append(above, t)
			}
			continue
		}
		if !(u.Peak <= peak) {
			peak, mean, at = u.Peak, u.Mean, u.Sessions
		}
	}
	if math.IsNaN(peak) {
		c.Simulated, c.Status = fmt.Sprintf("no step at or below %g sessions", upTo), Missed
		return c
	}
	c.Simulated = fmt.Sprintf("peak %.0f%% (mean %.0f%%) at %d sessions", 100*peak, 100*mean, at)
	if len(above) > 0 {
		c.Simulated += "; " + strings.Join(above, ", ")
	}
	c.Status = Missed
	if peak < p.KVPeak.High {
		c.Status = Held
	}
	return c
}

// inFlightCell is today's mix's requests in flight at the baseline step.
func inFlightCell(p Published, sessions int, w Sweep, ok bool) Cell {
	f := *p.InFlight.AtToday
	c := Cell{Recipe: p.Recipe, Column: ColInFlight, Published: f.Text,
		Tolerance: fmt.Sprintf("requests in flight at %d sessions within 25%% of %g", sessions, f.Value)}
	if c, done := notRun(c, w, ok); done {
		return c
	}
	v, found := math.NaN(), false
	for _, st := range w.Summary.Steps {
		if st.Sessions == sessions {
			v, found = st.Load.InFlight, true
			break
		}
	}
	if !found {
		c.Simulated, c.Status = fmt.Sprintf("no %d-session step", sessions), Missed
		return c
	}
	c.Simulated = fmt.Sprintf("%.1f", v)
	c.Status = Missed
	if math.Abs(v-f.Value) <= 0.25*f.Value {
		c.Status = Held
	}
	return c
}

func errors128K(p Published, w Sweep, ok bool) Cell {
	c := Cell{Recipe: p.Recipe, Column: ColErrors128K, Headline: true,
		Published: "fails on errors: refusals of prompts over 128K", Tolerance: `today's sweep "limited by errors"`}
	if c, done := notRun(c, w, ok); done {
		return c
	}
	c.Simulated = "limited by " + w.Summary.Capacity.LimitedBy
	if len(w.Summary.Steps) > 0 {
		c.Simulated += fmt.Sprintf("; errors %.0f%% at %d sessions", 100*w.Summary.Steps[0].ErrorRate.Center, w.Summary.Steps[0].Sessions)
	}
	c.Status = Missed
	if simLimit(w.Summary.Capacity) == LimitErrors {
		c.Status = Held
	}
	return c
}

func pdLight(p Published, w Sweep, ok bool) Cell {
	c := Cell{Recipe: p.Recipe, Column: ColPDLight, Headline: true, Published: p.Light.Text}
	if c, done := notRun(c, w, ok); done {
		return c
	}
	ladder := ladderOf(w.Summary)
	first := 0
	if len(ladder) > 0 {
		first = ladder[0]
	}
	c.Tolerance = fmt.Sprintf("light-only capacity below the first step (%d sessions)", first)
	c.Simulated = capacityWords(w)
	c.Status = Missed
	if hasCapacity(w.Summary.Capacity) && (w.Summary.Capacity.BelowFirst || w.Summary.Capacity.Sessions < float64(first)) {
		c.Status = Held
	}
	return c
}

// lightOverHeavy compares requests in flight per session of the light-only
// and heavy-only ladders at every step both ran.
func lightOverHeavy(n int, light, heavy Sweep) Cell {
	c := Cell{Recipe: n, Column: ColLightHeavy, Headline: true,
		Published: "light-only sessions keep more requests in flight each than heavy-only ones",
		Tolerance: "light-only above heavy-only in flight per session at every step both ran"}
	byStep := func(w Sweep) map[int]float64 {
		m := map[int]float64{}
		for _, st := range w.Summary.Steps {
			if _, seen := m[st.Sessions]; !seen && st.Load.Sent > 0 {
				m[st.Sessions] = st.Load.InFlightPerSession
			}
		}
		return m
	}
	l, h := byStep(light), byStep(heavy)
	var parts []string
	all := true
	for _, s := range ladderOf(light.Summary) {
		hv, ok := h[s]
		if !ok {
			continue
		}
		parts = append(parts, fmt.Sprintf("%d: %.2f vs %.2f", s, l[s], hv))
		if !(l[s] > hv) {
			all = false
		}
	}
	if len(parts) == 0 {
		c.Simulated, c.Status = "no step both ran", NotRun
		return c
	}
	c.Simulated = strings.Join(parts, "; ")
	c.Status = Missed
	if all {
		c.Status = Held
	}
	return c
}

// order is one relation of the published ordering.
type order struct {
	a, b   int
	strict bool
}

// publishedOrder is the ordering of today's capacities,
// 7 >= 6 > 3 > 1 >= 5 >= 0.
var publishedOrder = []order{{7, 6, false}, {6, 3, true}, {3, 1, true}, {1, 5, false}, {5, 0, false}}

// ordering checks the capacities of today's mix against the published
// order: a > b when a's capacity is above b's; a >= b unless a's is below
// b's with intervals apart (the data then say a < b).
func ordering(s Study) Cell {
	c := Cell{Recipe: -1, Column: ColOrdering, Headline: true, Published: "7 ≥ 6 > 3 > 1 ≥ 5 ≥ 0",
		Tolerance: "a > b: a's capacity above b's; a ≥ b: not below it with the intervals apart"}
	var parts []string
	c.Status = Held
	for _, o := range publishedOrder {
		a, okA := s.Find(o.a, Today)
		b, okB := s.Find(o.b, Today)
		if !okA || !okB {
			c.Status, c.Simulated = NotRun, "a recipe was not run"
			return c
		}
		ca, cb := a.Summary.Capacity, b.Summary.Capacity
		ok := ca.Sessions > cb.Sessions
		if !o.strict {
			ok = ca.Sessions >= cb.Sessions || ca.Hi >= cb.Lo
		}
		rel := map[bool]string{true: ">", false: "≥"}[o.strict]
		mark := ""
		if !ok {
			mark, c.Status = " ✗", Missed
		}
		parts = append(parts, fmt.Sprintf("%d (%.1f) %s %d (%.1f)%s", o.a, ca.Sessions, rel, o.b, cb.Sessions, mark))
	}
	c.Simulated = strings.Join(parts, "; ")
	return c
}

// hostCache checks that the host cache added nothing measurable: recipe
// with's capacity on today's mix is not above its twin's with the
// intervals apart.
func hostCache(s Study, with, without int) Cell {
	c := Cell{Recipe: with, Column: ColHostCache, Headline: true,
		Published: fmt.Sprintf("HiCache added nothing measurable (recipe %d against %d)", with, without),
		Tolerance: fmt.Sprintf("recipe %d's capacity not above %d's with the intervals apart", with, without)}
	a, okA := s.Find(with, Today)
	b, okB := s.Find(without, Today)
	if !okA || !okB {
		c.Status, c.Simulated = NotRun, "a recipe was not run"
		return c
	}
	ca, cb := a.Summary.Capacity, b.Summary.Capacity
	c.Simulated = fmt.Sprintf("%d: %s; %d: %s", with, capacityWords(a), without, capacityWords(b))
	c.Status = Held
	if ca.Sessions > cb.Sessions && ca.Lo > cb.Hi {
		c.Status = Missed
	}
	return c
}
