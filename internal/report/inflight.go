package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/headroom-bench/headroom/internal/load"
)

// StepTiers is one step's load split by tier, as records.jsonl shows it:
// how many requests each tier's sessions keep in flight. The reference
// report's surprise ("light users aren't light") is read here: light
// sessions fan out subagents and keep more requests open than heavy ones.
type StepTiers struct {
	Step     int        `json:"step"` // index in Summary.Steps
	Sessions int        `json:"sessions"`
	Tiers    []TierLoad `json:"tiers"`
}

// TierLoad is one tier's part of a step.
type TierLoad struct {
	Tier string `json:"tier"`
	// Sessions is how many of the step's lanes replay this tier's sessions.
	Sessions int `json:"sessions"`
	// Requests is how many requests the tier's lanes sent in the judged
	// time; SubagentRequests of them came from subagents.
	Requests         int `json:"requests"`
	SubagentRequests int `json:"subagent_requests"`
	// InFlightPerSession is the mean number of the tier's requests in
	// flight over the judged time, per session of the tier. A request is in
	// flight from its send to its last token; one that failed before any
	// token counts only up to its first token or, without one, not at all,
	// since a record does not carry when a failure came back.
	InFlightPerSession float64 `json:"in_flight_per_session"`
}

// readTiers reads records.jsonl and splits each step's load by tier; nil
// when the run directory has no records.
func readTiers(d *Dir, steps []Step) ([]StepTiers, error) {
	f, ok, err := d.openRecords()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, nil
	}
	defer f.Close()
	type acc struct {
		lanes              map[int]bool
		busy               float64 // request-seconds in flight within the judged time
		requests, subagent int
	}
	byStep := make([]map[string]*acc, len(steps))
	sc := bufio.NewScanner(bufio.NewReaderSize(f, 1<<20))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r load.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			break // a killed run's torn last line: keep what came before it
		}
		if r.Step < 0 || r.Step >= len(steps) || r.Sessions != steps[r.Step].Sessions || r.Tier == "" || r.Error == load.ErrUnsent {
			continue
		}
		st := steps[r.Step]
		if byStep[r.Step] == nil {
			byStep[r.Step] = map[string]*acc{}
		}
		a := byStep[r.Step][r.Tier]
		if a == nil {
			a = &acc{lanes: map[int]bool{}}
			byStep[r.Step][r.Tier] = a
		}
		a.lanes[r.Lane] = true
		end := r.LastToken
		if end == 0 {
			end = r.FirstToken
		}
		if ov := math.Min(end, st.EndS) - math.Max(r.Send, st.MeasureStartS); ov > 0 {
			a.busy += ov
		}
		if r.Send >= st.MeasureStartS && r.Send < st.EndS && r.Phase != load.PhasePrime {
			a.requests++
			if r.Agent != "" {
				a.subagent++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", d.File("records.jsonl"), err)
	}
	var out []StepTiers
	for i, m := range byStep {
		if m == nil {
			continue
		}
		st := StepTiers{Step: i, Sessions: steps[i].Sessions}
		span := steps[i].EndS - steps[i].MeasureStartS
		for tier, a := range m {
			tl := TierLoad{Tier: tier, Sessions: len(a.lanes), Requests: a.requests, SubagentRequests: a.subagent, InFlightPerSession: math.NaN()}
			if span > 0 && tl.Sessions > 0 {
				tl.InFlightPerSession = a.busy / span / float64(tl.Sessions)
			}
			st.Tiers = append(st.Tiers, tl)
		}
		sort.Slice(st.Tiers, func(a, b int) bool { return st.Tiers[a].Tier < st.Tiers[b].Tier })
		out = append(out, st)
	}
	return out, nil
}

// MarshalJSON writes an in-flight figure that could not be measured as null.
func (t TierLoad) MarshalJSON() ([]byte, error) {
	type plain TierLoad
	var v *float64
	if !math.IsNaN(t.InFlightPerSession) {
		v = &t.InFlightPerSession
	}
	return json.Marshal(struct {
		plain
		InFlightPerSession *float64 `json:"in_flight_per_session"`
	}{plain(t), v})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (t *TierLoad) UnmarshalJSON(b []byte) error {
	type plain TierLoad
	var j struct {
		plain
		InFlightPerSession *float64 `json:"in_flight_per_session"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*t = TierLoad(j.plain)
	t.InFlightPerSession = math.NaN()
	if j.InFlightPerSession != nil {
		t.InFlightPerSession = *j.InFlightPerSession
	}
	return nil
}

// tierNames are the tiers in the steps, in order.
func tierNames(ts []StepTiers) []string {
	seen := map[string]bool{}
	var out []string
	for _, st := range ts {
		for _, t := range st.Tiers {
			if !seen[t.Tier] {
				seen[t.Tier] = true
				out = append(out, t.Tier)
			}
		}
	}
	sort.Strings(out)
	return out
}

// tierFinding says in a line which tier keeps more requests in flight per
// session over the run's steps: the reference's "light users aren't light".
// Empty with fewer than two tiers.
func tierFinding(ts []StepTiers) string {
	names := tierNames(ts)
	if len(names) < 2 {
		return ""
	}
	mean := map[string]float64{}
	for _, n := range names {
		sum, k := 0.0, 0
		for _, st := range ts {
			for _, t := range st.Tiers {
				if t.Tier == n && !math.IsNaN(t.InFlightPerSession) {
					sum += t.InFlightPerSession
					k++
				}
			}
		}
		if k == 0 {
			return ""
		}
		mean[n] = sum / float64(k)
	}
	sort.SliceStable(names, func(i, j int) bool { return mean[names[i]] > mean[names[j]] })
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", n, mean[n]))
	}
	out := fmt.Sprintf("Requests in flight per session, averaged over the steps: %s.", strings.Join(parts, ", "))
	switch first, second := mean[names[0]], mean[names[1]]; {
	case first < 1.1*second:
		out += " The tiers keep about as many requests in flight per session (within 10%)."
	case names[0] == "light":
		out += " Light users aren't light: their subagents keep more requests in flight per session than the heavy sessions' long prompts do, so plan capacity in requests in flight as well as in users."
	}
	return out
}

// tierColours are the tiers' colours in the in-flight chart; each line also
// has its own marker shape and a label.
var tierColours = []string{"#bc4c00", "#0969da", "#8250df", "#1a7f37"}

// inFlightChart draws requests in flight per session against sessions, one
// line per tier.
func inFlightChart(ts []StepTiers, width float64) string {
	names := tierNames(ts)
	maxS, top := 1.0, 0.0
	for _, st := range ts {
		maxS = math.Max(maxS, float64(st.Sessions))
		for _, t := range st.Tiers {
			if !math.IsNaN(t.InFlightPerSession) {
				top = math.Max(top, t.InFlightPerSession)
			}
		}
	}
	top = niceCeil(math.Max(top*1.15, 0.5), 5)
	xMax := maxS + math.Max(1, 0.05*maxS)
	var legend []legendItem
	for i, n := range names {
		legend = append(legend, legendItem{lineMark(tierColours[i%len(tierColours)], "", 2.2) + shapeMark(i, 12, 10, tierColours[i%len(tierColours)]), n + " sessions"})
	}
	p := newPlotW(width, 380, 0, xMax, 0, top)
	p.fitLegend(legend)
	var steps []Step
	for _, st := range ts {
		steps = append(steps, Step{Sessions: st.Sessions})
	}
	p.axes(sessionTicks(steps, xMax), niceTicks(0, top, 5), tickLabel, tickLabel, "concurrent sessions", "requests in flight per session")
	var labels []endLabel
	for i, n := range names {
		col := tierColours[i%len(tierColours)]
		// one point per number of sessions: the latest step at it
		latest := map[int]TierLoad{}
		for _, st := range ts {
			for _, t := range st.Tiers {
				if t.Tier == n {
					latest[st.Sessions] = t
				}
			}
		}
		var xs []int
		for s := range latest {
			xs = append(xs, s)
		}
		sort.Ints(xs)
		var line []string
		for _, s := range xs {
			t := latest[s]
			if math.IsNaN(t.InFlightPerSession) {
				continue
			}
			x, y := p.px(float64(s)), p.py(t.InFlightPerSession)
			line = append(line, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		if len(line) > 1 {
			p.add(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2.2"/>`+"\n", strings.Join(line, " "), col)
		}
		for _, s := range xs {
			t := latest[s]
			if math.IsNaN(t.InFlightPerSession) {
				continue
			}
			x, y := p.px(float64(s)), p.py(t.InFlightPerSession)
			p.add(`<g class="tier-point"><title>%d sessions: %d %s sessions keep %.2f requests in flight each (%d requests, %d from subagents)</title>%s</g>`+"\n",
				s, t.Sessions, esc(n), t.InFlightPerSession, t.Requests, t.SubagentRequests, shapeMark(i, x, y, col))
		}
		if len(xs) > 0 {
			if t := latest[xs[len(xs)-1]]; !math.IsNaN(t.InFlightPerSession) {
				labels = append(labels, endLabel{p.px(float64(xs[len(xs)-1])) + 10, p.py(t.InFlightPerSession) + 5, col, n})
			}
		}
	}
	// the names at the lines' ends, pushed apart where the lines end close
	sort.Slice(labels, func(a, b int) bool { return labels[a].y < labels[b].y })
	for i := 1; i < len(labels); i++ {
		labels[i].y = math.Max(labels[i].y, labels[i-1].y+16)
	}
	for _, l := range labels {
		p.haloText(l.x, l.y, "start", `font-size="14" font-weight="700" fill="`+l.col+`"`, l.text)
	}
	p.legend(legend)
	return p.svg("Requests in flight per session, by tier")
}

// endLabel is a series' name at the end of its line.
type endLabel struct {
	x, y      float64
	col, text string
}

// shapeMark is the i-th series' marker: circle, square, diamond, triangle
// down, then again.
func shapeMark(i int, cx, cy float64, col string) string {
	const r = 6.0
	switch i % 4 {
	case 1:
		return fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" stroke="#fff" stroke-width="1.5"/>`, cx-r, cy-r, 2*r, 2*r, col)
	case 2:
		return fmt.Sprintf(`<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s" stroke="#fff" stroke-width="1.5"/>`, cx, cy-r*1.35, cx+r*1.35, cy, cx, cy+r*1.35, cx-r*1.35, cy, col)
	case 3:
		return fmt.Sprintf(`<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s" stroke="#fff" stroke-width="1.5"/>`, cx-r*1.2, cy-r, cx+r*1.2, cy-r, cx, cy+r*1.2, col)
	}
	return fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s" stroke="#fff" stroke-width="1.5"/>`, cx, cy, r, col)
}
