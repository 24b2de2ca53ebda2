package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// stepMetric is one bar part drawn against sessions.
type stepMetric struct {
	id, title, unit, ylabel string
	value                   func(Step) stats.Summary
	scale                   float64 // errors are fractions drawn as percent
	bar                     float64 // in the drawn unit
	higherIsBetter          bool
	strict                  bool // errors pass below the bar, not at it
}

func (m stepMetric) holds(v float64) bool {
	switch {
	case m.higherIsBetter:
		return v >= m.bar
	case m.strict:
		return v < m.bar
	}
	return v <= m.bar
}

func (m stepMetric) barWords() string {
	switch {
	case m.higherIsBetter:
		return fmt.Sprintf("bar: ≥ %s %s", num(m.bar), m.unit)
	case m.strict:
		return fmt.Sprintf("bar: < %s%s", num(m.bar), m.unit)
	}
	return fmt.Sprintf("bar: ≤ %s %s", num(m.bar), m.unit)
}

// verdictOf is the step's verdict on this part: a step that failed on TTFT
// may hold the bar on interactivity.
func (m stepMetric) verdictOf(st Step) verdict.Verdict {
	if p, ok := partOf(st, m.id); ok {
		return p.Verdict
	}
	return st.Verdict
}

// stepMetrics are the three parts of the bar, in the order the page shows them.
func stepMetrics(s Summary) []stepMetric {
	return []stepMetric{
		{id: verdict.PartTTFT, title: "P90 time to first token", unit: "s", ylabel: "P90 TTFT (seconds)",
			value: func(st Step) stats.Summary { return st.TTFTP90 }, scale: 1, bar: s.Bar.TTFTP90},
		{id: verdict.PartInteractivity, title: "P90 interactivity", unit: "tokens/s", ylabel: "P90 interactivity (tokens/s per user)",
			value: func(st Step) stats.Summary { return st.InteractivityP90 }, scale: 1, bar: s.Bar.InteractivityP90, higherIsBetter: true},
		{id: verdict.PartErrors, title: "Error rate", unit: "%", ylabel: "errors (% of turns)",
			value: func(st Step) stats.Summary { return st.ErrorRate }, scale: 100, bar: s.Bar.ErrorRate * 100, strict: true},
	}
}

func partOf(st Step, name string) (verdict.Part, bool) {
	for _, p := range st.Parts {
		if p.Name == name {
			return p, true
		}
	}
	return verdict.Part{}, false
}

// pooled splits the steps as capacity reads them (sweep.Points): for each
// number of sessions the latest judgement, which for a repeated step pools
// both runs' windows, in order of sessions; and the earlier runs of the
// repeated steps, whose own verdicts the pooled one replaced.
func pooled(steps []Step) (curve, earlier []Step) {
	latest := map[int]int{}
	for i, st := range steps {
		latest[st.Sessions] = i
	}
	for i, st := range steps {
		if latest[st.Sessions] == i {
			curve = append(curve, st)
		} else {
			earlier = append(earlier, st)
		}
	}
	by := func(x []Step) { sort.SliceStable(x, func(i, j int) bool { return x[i].Sessions < x[j].Sessions }) }
	by(curve)
	by(earlier)
	return curve, earlier
}

// measuredCapacity reports whether the sweep found where capacity ends.
func measuredCapacity(c sweep.Capacity) bool {
	return !c.AtLeast && (c.Sessions > 0 || c.BelowFirst)
}

// crossing is where the part's centre line leaves the bar. For the part that
// limited capacity it is the capacity itself, so the ▲ and the capacity card
// say one number; any other part is read as its line shows it: after the
// highest step at which its centre held (and the part did not fail),
// interpolated to the next step, never into a step without data (capacity
// itself is fitted from every step at once: sweep.CapacityOf).
func crossing(s Summary, curve []Step, m stepMetric) (float64, bool) {
	if len(curve) == 0 {
		return 0, false
	}
	if c := s.Capacity; c.LimitedBy == m.id && measuredCapacity(c) {
		if c.BelowFirst {
			return float64(curve[0].Sessions), true
		}
		return c.Sessions, true
	}
	val := func(k int) (float64, bool) {
		v := m.value(curve[k]).Center * m.scale
		return v, !math.IsNaN(v) && m.verdictOf(curve[k]) != verdict.NoData
	}
	k := -1
	for i := range curve {
		if v, ok := val(i); ok && m.holds(v) && m.verdictOf(curve[i]) != verdict.Fail {
			k = i
		}
	}
	switch {
	case k == len(curve)-1:
		return 0, false
	case k < 0:
		if _, ok := val(0); ok {
			return float64(curve[0].Sessions), true
		}
		return 0, false
	}
	v, ok := val(k + 1)
	if !ok {
		return 0, false // nothing measured past it: no crossing is drawn into the unknown
	}
	prevV, _ := val(k)
	prevS, nextS := float64(curve[k].Sessions), float64(curve[k+1].Sessions)
	at := prevS
	if v != prevV {
		at = prevS + (m.bar-prevV)/(v-prevV)*(nextS-prevS)
	}
	return math.Max(prevS, math.Min(nextS, at)), true
}

// unrun is the next step of the ladder, which the sweep did not run, when
// capacity's upper end is open (every step passed, or nothing above the last
// step was measured) and the part was measured at the last step: it is
// drawn dashed, with a "?". A last step without data is its own "?".
func unrun(curve []Step, c sweep.Capacity, m stepMetric) (float64, bool) {
	n := len(curve)
	if n == 0 || !(c.AtLeast || c.HiOpen) || math.IsNaN(m.value(curve[n-1]).Center) || m.verdictOf(curve[n-1]) == verdict.NoData {
		return 0, false
	}
	last, gap := curve[n-1].Sessions, curve[n-1].Sessions
	if n >= 2 {
		gap = last - curve[n-2].Sessions
	}
	return float64(last + max(gap, 1)), true
}

// bucketWide reports whether a step's interval on the part is exactly the
// histogram bucket holding its P90: the histogram cannot tell more, and a
// gateway with finer buckets would narrow it.
func bucketWide(st Step, name string) (verdict.Part, bool) {
	p, ok := partOf(st, name)
	if !ok || p.Verdict == verdict.NoData {
		return p, false
	}
	lo, hi := p.Bucket[0], p.Bucket[1]
	if !(hi > lo) || math.IsInf(hi, 0) || math.IsNaN(p.Value.Lo) || math.IsNaN(p.Value.Hi) {
		return p, false
	}
	same := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	return p, same(p.Value.Lo, lo) && same(p.Value.Hi, hi)
}

// chartGeom is what every curve of a part against sessions shares.
type chartGeom struct {
	p    *plot
	top  float64
	xMax float64
}

// sessionsPlot sets up a chart of a part against sessions: the domain
// reaches past the bar so its band shows, and is cut at 4x the bar so one
// wild step does not flatten the rest (cut values get an arrow).
func sessionsPlot(m stepMetric, w, h float64, steps []Step, xMax float64, legend []legendItem) chartGeom {
	top := 0.0
	for _, st := range steps {
		v := m.value(st)
		for _, x := range []float64{v.Center, v.Lo, v.Hi} {
			if !math.IsNaN(x) && !math.IsInf(x, 0) {
				top = math.Max(top, x*m.scale)
			}
		}
	}
	top *= 1.1
	if m.bar > 0 {
		top = math.Max(top, 1.6*m.bar)
		top = math.Min(top, 4*m.bar)
	}
	if top <= 0 {
		top = 1
	}
	top = niceCeil(top, 5)
	p := newPlotW(w, h, 0, xMax, 0, top)
	p.fitLegend(legend)
	if m.higherIsBetter {
		p.rect(0, xMax, m.bar, top, colBand, ` class="bar-band"`)
	} else {
		p.rect(0, xMax, 0, m.bar, colBand, ` class="bar-band"`)
	}
	return chartGeom{p: p, top: top, xMax: xMax}
}

// barLine draws the bar and its words at the left, on the band's side.
func (g chartGeom) barLine(m stepMetric) float64 {
	p := g.p
	by := p.py(m.bar)
	p.add(`<line class="bar-line" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"/>`+"\n", p.l, p.w-p.r, by, by, colBarLine)
	y := by - 8
	if m.higherIsBetter {
		y = by + 20
	}
	p.haloText(p.l+10, y, "start", `font-size="15" font-weight="700" fill="`+colBarText+`"`, m.barWords())
	return by
}

// curvePoint is one step of a curve placed on the chart.
type curvePoint struct {
	st       Step
	x, y     float64 // pixels
	measured bool
}

// drawCurve draws a curve through the steps' centres: solid between steps
// measured one after the other, dashed into and out of a step without data,
// which is a "?" (at the height of the step before it), and dashed past the
// last step to the next one, not run, when extra is set. It returns the
// measured points and where the rightmost mark (a point or a "?") is.
func (g chartGeom) drawCurve(m stepMetric, curve []Step, col string, extraX float64, extra bool) (measured []curvePoint, endX, endY float64) {
	p := g.p
	var pts []curvePoint
	for _, st := range curve {
		v := m.value(st).Center * m.scale
		cp := curvePoint{st: st, x: p.px(float64(st.Sessions))}
		if !math.IsNaN(v) && m.verdictOf(st) != verdict.NoData {
			y, _ := p.clampY(v)
			cp.y, cp.measured = p.py(y), true
		}
		pts = append(pts, cp)
	}
	// a step without data sits at the height of the last one measured
	// before it (or of the first after it)
	for i := range pts {
		if pts[i].measured {
			continue
		}
		pts[i].y = p.py(0) - 12
		for j := i - 1; j >= 0; j-- {
			if pts[j].measured {
				pts[i].y = pts[j].y
				break
			}
		}
		if i > 0 && pts[i-1].measured || i == 0 {
			continue
		}
		for j := i + 1; j < len(pts); j++ {
			if pts[j].measured {
				pts[i].y = pts[j].y
				break
			}
		}
	}
	var solid []string
	flush := func() {
		if len(solid) > 1 {
			p.add(`<polyline class="curve" points="%s" fill="none" stroke="%s" stroke-width="2.2" stroke-linejoin="round"/>`+"\n", strings.Join(solid, " "), col)
		}
		solid = nil
	}
	dashed := func(x0, y0, x1, y1 float64) {
		p.add(`<line class="unmeasured" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="6 5"/>`+"\n", x0, y0, x1, y1, col)
	}
	for i, q := range pts {
		if q.measured {
			solid = append(solid, fmt.Sprintf("%.1f,%.1f", q.x, q.y))
			continue
		}
		flush()
		if i > 0 {
			dashed(pts[i-1].x, pts[i-1].y, q.x, q.y)
		}
		if i+1 < len(pts) {
			dashed(q.x, q.y, pts[i+1].x, pts[i+1].y)
		}
	}
	flush()
	var out []curvePoint
	for _, q := range pts {
		if !q.measured {
			p.occupy(box{q.x - 10, q.y - 10, q.x + 10, q.y + 10})
			p.add(`<g class="not-measured"><title>%d sessions: %s not measured (no data)</title>%s</g>`+"\n", q.st.Sessions, esc(m.id), unknownMark(q.x, q.y))
			continue
		}
		out = append(out, q)
	}
	n := len(pts)
	if n > 0 {
		endX, endY = pts[n-1].x, pts[n-1].y
	}
	if extra && n > 0 && pts[n-1].measured {
		last := pts[n-1]
		x := p.px(extraX)
		dashed(last.x, last.y, x, last.y)
		p.occupy(box{x - 10, last.y - 10, x + 10, last.y + 10})
		p.add(`<g class="not-measured"><title>%s sessions: not run</title>%s</g>`+"\n", num1(extraX), unknownMark(x, last.y))
		endX = x
	}
	return out, endX, endY
}

// tipInterval is a step's interval in a tooltip: "lo–hi", or open on the
// bad side when the kill switch cut its run short or the engine was at its
// limit (verdict.Part.Open).
func tipInterval(m stepMetric, st Step) string {
	v := m.value(st)
	if part, ok := partOf(st, m.id); ok && part.Open() != "" {
		if m.higherIsBetter {
			return "≤ " + num(v.Hi*m.scale) + ", " + part.Open()
		}
		return "≥ " + num(v.Lo*m.scale) + ", " + part.Open()
	}
	return num(v.Lo*m.scale) + "–" + num(v.Hi*m.scale)
}

// whisker draws a step's 95% interval at x, with an arrow where the top is
// cut, and marks an interval that is exactly one histogram bucket.
func (g chartGeom) whisker(m stepMetric, st Step, x float64, col string, thin bool) {
	p := g.p
	v := m.value(st)
	cut := ""
	if part, ok := partOf(st, m.id); ok && part.Open() != "" {
		// the kill switch ended the run, or the engine was at its limit:
		// the bad side is open (to the axis for a part where higher is
		// better, past the top otherwise)
		cut = "cut short"
		if !part.CutShort {
			cut = "at limit"
		}
		v.Lo, v.Hi = part.Bounds()
	}
	lo, _ := p.clampY(v.Lo * m.scale)
	hi, cutHi := p.clampY(v.Hi * m.scale)
	if math.IsNaN(v.Lo) {
		lo = v.Center * m.scale
	}
	if math.IsNaN(v.Hi) {
		hi, cutHi = v.Center*m.scale, false
	}
	ylo, yhi := p.py(lo), p.py(hi)
	width, dash := 1.8, ""
	if thin {
		width, dash = 1.3, ` stroke-dasharray="3 2"`
	}
	if part, ok := bucketWide(st, m.id); ok && !thin {
		p.add(`<g class="bucket-wide"><title>%d sessions: the interval %s–%s %s is the histogram bucket holding the P90; finer buckets would narrow it</title>`,
			st.Sessions, num(part.Bucket[0]*m.scale), num(part.Bucket[1]*m.scale), esc(m.unit))
		p.add(`<rect x="%.1f" y="%.1f" width="8" height="%.1f" fill="%s" fill-opacity="0.35" stroke="%s" stroke-width="1" stroke-dasharray="2 2"/></g>`+"\n", x-4, yhi, ylo-yhi, colNoData, colNoData)
		p.label(x+9, (ylo+yhi)/2+4, "start", `font-size="12" font-style="italic" fill="`+colMuted+`"`, "bucket")
	}
	p.add(`<path d="M%.1f %.1f V%.1f M%.1f %.1f H%.1f" stroke="%s" stroke-width="%.1f" fill="none"%s/>`+"\n", x, ylo, yhi, x-6, ylo, x+6, col, width, dash)
	if cutHi {
		p.add(`<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"/>`+"\n", x, yhi-2, x+6, yhi+8, x-6, yhi+8, col)
		// an earlier run's whisker stands left of the pooled one: its value
		// goes on its left, the pooled one's on its right
		top := "↑ " + num(v.Hi*m.scale)
		if cut != "" && math.IsInf(v.Hi, 1) {
			top = "↑ " + cut
		}
		if thin {
			p.label(x-9, yhi+14, "end", `font-size="13" fill="`+col+`"`, top)
		} else {
			p.label(x+9, yhi+14, "start", `font-size="13" fill="`+col+`"`, top)
		}
	} else {
		p.add(`<path d="M%.1f %.1f H%.1f" stroke="%s" stroke-width="%.1f"%s/>`+"\n", x-6, yhi, x+6, col, width, dash)
	}
}

// stepChart draws one part against sessions, as the reference's figures
// do: the region within the bar as a green band; each step's centre with
// its 95% interval, the curve through the pooled value of a repeated step
// and its earlier run drawn hollow beside it; steps not measured dashed with
// "?"; an interval that is one histogram bucket marked so; the capacity
// interval; and ▲ on the bar's line where the curve leaves the bar, at the
// capacity the headline shows for the part that limited it.
func stepChart(s Summary, m stepMetric, width float64) string {
	curve, earlier := pooled(s.Steps)
	c := s.Capacity
	maxS := 1.0
	for _, st := range s.Steps {
		maxS = math.Max(maxS, float64(st.Sessions))
	}
	extX, ext := unrun(curve, c, m)
	if ext {
		maxS = math.Max(maxS, extX)
	}
	xMax := maxS + math.Max(1, 0.05*maxS)

	bucket, unmeasured := false, ext
	for _, st := range curve {
		_, b := bucketWide(st, m.id)
		bucket = bucket || b
		unmeasured = unmeasured || math.IsNaN(m.value(st).Center) || m.verdictOf(st) == verdict.NoData
	}
	legend := []legendItem{
		{marker("pass", 12, 10, 6), "pass"},
		{marker("too_close", 12, 10, 5.5), "too close"},
		{marker("fail", 12, 10, 6), "fail"},
	}
	if len(earlier) > 0 {
		legend = append(legend, legendItem{hollowMarker("pass", 12, 10, 6), "first run of a repeated step (the line goes through both runs pooled)"})
	}
	if unmeasured {
		legend = append(legend, legendItem{lineMark(colCurve, "6 5", 2) + unknownMark(12, 10), "not measured"})
	}
	legend = append(legend, legendItem{errorBarMark(), "95% interval"})
	if bucket {
		legend = append(legend, legendItem{`<rect x="8" y="1" width="8" height="18" fill="` + colNoData + `" fill-opacity="0.35" stroke="` + colNoData + `" stroke-dasharray="2 2"/>`, "interval = one histogram bucket"})
	}
	legend = append(legend,
		legendItem{swatch(colBand, colBarLine), "within the bar"},
		legendItem{swatch("rgba(9,105,218,0.12)", colCapacity), "capacity, 95% interval"},
		legendItem{triangle(12, 18), "crosses the bar"},
	)

	g := sessionsPlot(m, width, 440, s.Steps, xMax, legend)
	p := g.p
	xt := sessionTicks(s.Steps, xMax)
	if ext && len(xt) <= 16 {
		xt = append(xt, extX)
	}
	p.axes(xt, niceTicks(0, g.top, 5), tickLabel, tickLabel, "concurrent sessions", m.ylabel)
	capLabel := ""
	if measuredCapacity(c) && !c.BelowFirst {
		p.rect(c.Lo, c.Hi, 0, g.top, colCapacity, ` fill-opacity="0.10"`)
		x := p.px(c.Sessions)
		p.add(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="7 5"/>`+"\n", x, x, p.py(g.top), p.py(0), colCapacity)
		capLabel = fmt.Sprintf("capacity ≈ %s (%s–%s)", num1(c.Sessions), num1(c.Lo), hiWords(c))
	}
	by := g.barLine(m)
	if capLabel != "" {
		x := p.px(c.Sessions)
		anchor, dx := "start", 8.0
		if x > p.w-p.r-260 {
			anchor, dx = "end", -8
		}
		p.keyLabel(0, x+dx, p.t+18, anchor, `font-size="14" font-weight="600" fill="#0550ae"`, capLabel)
	}

	// the earlier runs of repeated steps: hollow, just left of the pooled mark
	for _, st := range earlier {
		v := m.value(st)
		if math.IsNaN(v.Center) {
			continue
		}
		x := p.px(float64(st.Sessions)) - 11
		g.whisker(m, st, x, colMuted, true)
		cy, _ := p.clampY(v.Center * m.scale)
		vd := m.verdictOf(st)
		tip := fmt.Sprintf("%d sessions, first run (the repeat pools both): %s %s, %s %s (95%% interval %s)", st.Sessions, m.id, verdictWords(vd), num(v.Center*m.scale), m.unit, tipInterval(m, st))
		p.add(`<g class="first-run"><title>%s</title>%s</g>`+"\n", esc(tip), hollowMarker(string(vd), x, p.py(cy), 6))
	}

	pts, _, _ := g.drawCurve(m, curve, colCurve, extX, ext)
	for _, q := range pts {
		v := m.value(q.st)
		g.whisker(m, q.st, q.x, colMuted, false)
		vd := m.verdictOf(q.st)
		what := ""
		if len(earlier) > 0 && repeated(q.st, earlier) {
			what = ", both runs pooled"
		}
		tip := fmt.Sprintf("%d sessions%s: %s %s, %s %s (95%% interval %s)", q.st.Sessions, what, m.id, verdictWords(vd), num(v.Center*m.scale), m.unit, tipInterval(m, q.st))
		p.add(`<g class="step"><title>%s</title>%s</g>`+"\n", esc(tip), marker(string(vd), q.x, q.y, 7))
		if _, cut := p.clampY(v.Center * m.scale); cut {
			p.label(q.x-10, q.y+5, "end", `font-size="13" fill="`+colInk+`"`, "↑ "+num(v.Center*m.scale))
		}
	}
	if ext {
		p.keyLabel(0, p.px(extX), p.py(g.top)+20, "middle", `font-size="13" fill="`+colMuted+`"`, "? not run")
	}

	// ▲ on the bar's line; its label goes in the top row on the side of the
	// crossing where the curve is inside the bar
	if at, ok := crossing(s, curve, m); ok {
		x := p.px(at)
		words := "crosses the bar at ≈ " + num1(at)
		if c.BelowFirst && c.LimitedBy == m.id {
			words = fmt.Sprintf("misses the bar from the first step (%s)", num1(at))
		}
		p.add(`<g class="crossing" data-sessions="%s"><title>%s</title>%s</g>`+"\n", num1(at), esc(words), triangle(x, by))
		anchor, dx := "end", -10.0
		if m.higherIsBetter {
			anchor, dx = "start", 10
		}
		if anchor == "start" && x > p.w-p.r-230 {
			anchor, dx = "end", -10
		}
		if anchor == "end" && x < p.l+230 {
			anchor, dx = "start", 10
		}
		p.keyLabel(0, x+dx, p.t+40, anchor, `font-size="14" font-weight="700" fill="`+colInk+`"`, "▲ "+words)
	}
	p.legend(legend)
	return p.svg(m.title + " against concurrent sessions")
}

func repeated(st Step, earlier []Step) bool {
	for _, e := range earlier {
		if e.Sessions == st.Sessions {
			return true
		}
	}
	return false
}

// sessionTicks labels the x axis at the steps run, or at round numbers when
// there are too many steps to label.
func sessionTicks(steps []Step, xMax float64) []float64 {
	seen := map[int]bool{}
	var out []float64
	for _, st := range steps {
		if !seen[st.Sessions] {
			seen[st.Sessions] = true
			out = append(out, float64(st.Sessions))
		}
	}
	sort.Float64s(out)
	if len(out) == 0 || len(out) > 16 {
		return niceTicks(0, xMax, 10)
	}
	return append([]float64{0}, out...)
}

func num1(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%g", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// hiWords is the capacity's upper bound, marked ≥ when nothing above it ran.
func hiWords(c sweep.Capacity) string {
	if c.HiOpen {
		return "≥" + num1(c.Hi)
	}
	return num1(c.Hi)
}
