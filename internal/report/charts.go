package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
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

// stepMetrics are the three parts of the bar, in the order the page shows them.
func stepMetrics(s Summary) []stepMetric {
	return []stepMetric{
		{id: "ttft", title: "P90 time to first token", unit: "s", ylabel: "P90 TTFT (seconds)",
			value: func(st Step) stats.Summary { return st.TTFTP90 }, scale: 1, bar: s.Bar.TTFTP90},
		{id: "interactivity", title: "P90 interactivity", unit: "tokens/s", ylabel: "P90 interactivity (tokens/s per user)",
			value: func(st Step) stats.Summary { return st.InteractivityP90 }, scale: 1, bar: s.Bar.InteractivityP90, higherIsBetter: true},
		{id: "errors", title: "Error rate", unit: "%", ylabel: "errors (% of turns)",
			value: func(st Step) stats.Summary { return st.ErrorRate }, scale: 100, bar: s.Bar.ErrorRate * 100, strict: true},
	}
}

// stepChart draws one part against sessions: the region within the bar as a
// green band, each step's centre with its 95% interval as an error bar, the
// capacity interval, and ▲ where the centre line crosses the bar.
func stepChart(s Summary, m stepMetric) string {
	steps := append([]Step(nil), s.Steps...)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Sessions < steps[j].Sessions })

	maxS := 0.0
	var finite []float64
	for _, st := range steps {
		maxS = math.Max(maxS, float64(st.Sessions))
		v := m.value(st)
		for _, x := range []float64{v.Center, v.Lo, v.Hi} {
			if !math.IsNaN(x) && !math.IsInf(x, 0) {
				finite = append(finite, x*m.scale)
			}
		}
	}
	if maxS == 0 {
		maxS = 1
	}
	unmeasured := s.Capacity.AtLeast || s.Capacity.HiOpen
	xMax := maxS + math.Max(1, 0.05*maxS)
	if unmeasured {
		xMax = maxS + math.Max(2, 0.15*maxS)
	}

	// y reaches past the bar so its band shows, and is cut at 4x the bar so
	// one wild step does not flatten the rest; cut values get an arrow.
	top := 0.0
	for _, v := range finite {
		top = math.Max(top, v)
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
	p := newPlot(440, 0, xMax, 0, top)

	// the band of values within the bar, and the bar itself
	if m.higherIsBetter {
		p.rect(0, xMax, m.bar, top, colBand, ` class="bar-band"`)
	} else {
		p.rect(0, xMax, 0, m.bar, colBand, ` class="bar-band"`)
	}
	xticks := sessionTicks(steps, xMax)
	p.axes(xticks, niceTicks(0, top, 5), tickLabel, tickLabel, "concurrent sessions", m.ylabel)

	c := s.Capacity
	capLabel := ""
	if !c.BelowFirst && !c.AtLeast && c.Sessions > 0 {
		p.rect(c.Lo, c.Hi, 0, top, colCapacity, ` fill-opacity="0.10"`)
		x := p.px(c.Sessions)
		p.add(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="7 5"/>`+"\n", x, x, p.py(top), p.py(0), colCapacity)
		capLabel = fmt.Sprintf("capacity ≈ %s (%s–%s)", num1(c.Sessions), num1(c.Lo), hiWords(c))
	}
	if unmeasured {
		p.rect(maxS, xMax, 0, top, "url(#hatch)", "")
		p.text(p.px((maxS+xMax)/2), p.py(top)+20, "middle", `font-size="14" fill="`+colMuted+`"`, "? not measured")
	}

	by := p.py(m.bar)
	p.add(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"/>`+"\n", p.l, p.w-p.r, by, by, colBarLine)
	// the bar's label sits at the left, on the side of the band, where the
	// first steps are well inside it
	barLabelY := by - 8
	if m.higherIsBetter {
		barLabelY = by + 20
	}
	p.haloText(p.l+10, barLabelY, "start", `font-size="15" font-weight="700" fill="`+colBarText+`"`, m.barWords())
	if capLabel != "" {
		x := p.px(c.Sessions)
		anchor, dx := "start", 8.0
		if x > p.w-p.r-260 {
			anchor, dx = "end", -8
		}
		p.haloText(x+dx, p.t+18, anchor, `font-size="14" font-weight="600" fill="#0550ae"`, capLabel)
	}

	// centre line, error bars, markers
	var line []string
	for _, st := range steps {
		v := m.value(st)
		if math.IsNaN(v.Center) {
			continue
		}
		y, _ := p.clampY(v.Center * m.scale)
		line = append(line, fmt.Sprintf("%.1f,%.1f", p.px(float64(st.Sessions)), p.py(y)))
	}
	if len(line) > 1 {
		p.add(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"/>`+"\n", strings.Join(line, " "), colCurve)
	}
	for _, st := range steps {
		v := m.value(st)
		x := p.px(float64(st.Sessions))
		if math.IsNaN(v.Center) {
			p.add(`<g><title>%d sessions: no data</title>%s</g>`+"\n", st.Sessions, marker("no_data", x, p.py(0)-10, 7))
			p.haloText(x, p.py(0)-24, "middle", `font-size="13" fill="`+colNoData+`"`, "no data")
			continue
		}
		lo, _ := p.clampY(v.Lo * m.scale)
		hi, cutHi := p.clampY(v.Hi * m.scale)
		if math.IsNaN(v.Lo) {
			lo = v.Center * m.scale
		}
		if math.IsNaN(v.Hi) {
			hi = v.Center * m.scale
		}
		ylo, yhi := p.py(lo), p.py(hi)
		p.add(`<path d="M%.1f %.1f V%.1f M%.1f %.1f H%.1f" stroke="%s" stroke-width="1.8" fill="none"/>`+"\n", x, ylo, yhi, x-6, ylo, x+6, colMuted)
		if cutHi {
			p.add(`<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"/>`+"\n", x, yhi-2, x+6, yhi+8, x-6, yhi+8, colMuted)
			p.haloText(x+9, yhi+14, "start", `font-size="13" fill="`+colMuted+`"`, "↑ "+num(v.Hi*m.scale))
		} else {
			p.add(`<path d="M%.1f %.1f H%.1f" stroke="%s" stroke-width="1.8"/>`+"\n", x-6, yhi, x+6, colMuted)
		}
		cy, cut := p.clampY(v.Center * m.scale)
		// the mark is this part's verdict: a step that failed on TTFT may
		// hold the bar on interactivity
		vd := st.Verdict
		for _, pt := range st.Parts {
			if pt.Name == m.id {
				vd = pt.Verdict
			}
		}
		tip := fmt.Sprintf("%d sessions: %s %s, %s %s (95%% interval %s–%s)", st.Sessions, m.id, verdictWords(vd), num(v.Center*m.scale), m.unit, num(v.Lo*m.scale), num(v.Hi*m.scale))
		p.add(`<g><title>%s</title>%s</g>`+"\n", esc(tip), marker(string(vd), x, p.py(cy), 7))
		if cut {
			p.haloText(x-10, p.py(cy)+5, "end", `font-size="13" fill="`+colInk+`"`, "↑ "+num(v.Center*m.scale))
		}
	}

	// ▲ where the centre line first leaves the bar; its label goes in the
	// top row on the side of the crossing where the curve is inside the bar
	// (left for lower-is-better, right for higher-is-better)
	if at, ok := crossing(steps, m); ok {
		x := p.px(at)
		p.add(`<g class="crossing"><title>crosses the bar at ≈ %s sessions</title>%s</g>`+"\n", num1(at), triangle(x, by))
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
		p.haloText(x+dx, p.t+40, anchor, `font-size="14" font-weight="700" fill="`+colInk+`"`, "▲ crosses the bar at ≈ "+num1(at))
	}

	p.legend([]legendItem{
		{marker("pass", 12, 10, 6), "pass"},
		{marker("too_close", 12, 10, 5.5), "too close"},
		{marker("fail", 12, 10, 6), "fail"},
		{marker("no_data", 12, 10, 6), "no data"},
		{errorBarMark(), "95% interval"},
		{swatch(colBand, colBarLine), "within the bar"},
		{swatch("rgba(9,105,218,0.12)", colCapacity), "capacity, 95% interval"},
		{triangle(12, 2), "crosses the bar"},
	})
	return p.svgWithDefs(m.title + " against concurrent sessions")
}

// svgWithDefs is svg with the hatch pattern the unmeasured region uses.
func (p *plot) svgWithDefs(label string) string {
	defs := `<defs><pattern id="hatch" width="10" height="10" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="10" height="10" fill="#f6f8fa"/><line x1="0" y1="0" x2="0" y2="10" stroke="#afb8c1" stroke-width="3"/></pattern></defs>` + "\n"
	body := p.sb.String()
	p.sb.Reset()
	p.sb.WriteString(defs)
	p.sb.WriteString(body)
	return p.svg(label)
}

// crossing is where the centre line first leaves the bar, interpolated
// between the last step within it and the first outside; a line outside
// from the first step crosses at that step.
func crossing(steps []Step, m stepMetric) (float64, bool) {
	prevS, prevV, have := 0.0, 0.0, false
	for _, st := range steps {
		v := m.value(st).Center * m.scale
		if math.IsNaN(v) {
			continue
		}
		s := float64(st.Sessions)
		if !m.holds(v) {
			if !have {
				return s, true
			}
			at := prevS
			if v != prevV {
				at = prevS + (m.bar-prevV)/(v-prevV)*(s-prevS)
			}
			return math.Max(prevS, math.Min(s, at)), true
		}
		prevS, prevV, have = s, v, true
	}
	return 0, false
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
