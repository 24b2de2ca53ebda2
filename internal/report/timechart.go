package report

import (
	"fmt"
	"math"
	"strings"
)

// gaugeLine is one gauge drawn over time.
type gaugeLine struct {
	label string
	value func(GaugePoint) *float64
	scale float64
	col   string
	dash  string
	width float64
}

// timeChart draws gauges over modelled time, with each step's span marked:
// its warm-up shaded grey, its start as a line and its sessions on top.
func timeChart(series []GaugePoint, steps []Step, lines []gaugeLine, ylabel, title string, fixedTop float64, missing string, width float64) string {
	end := 0.0
	for _, g := range series {
		end = math.Max(end, g.AtS)
	}
	for _, st := range steps {
		end = math.Max(end, st.EndS)
	}
	unit, div := "minutes", 60.0
	if end > 3*3600 {
		unit, div = "hours", 3600
	}
	if end <= 0 {
		end = 1
	}

	top := fixedTop
	have := false
	for _, l := range lines {
		for _, g := range series {
			if v := l.value(g); v != nil {
				have = true
				if fixedTop == 0 {
					top = math.Max(top, *v*l.scale)
				}
			}
		}
	}
	if fixedTop == 0 {
		top = niceCeil(math.Max(top*1.1, 1), 5)
	}
	xMax := end / div
	var items []legendItem
	for _, l := range lines {
		items = append(items, legendItem{lineMark(l.col, l.dash, l.width), l.label})
	}
	items = append(items,
		legendItem{swatch(colWarmup, "#8c959f"), "warm-up (not judged)"},
		legendItem{`<text x="12" y="15" text-anchor="middle" font-size="14" font-weight="700" fill="` + colInk + `">12</text>`, "sessions in the step"},
	)
	p := newPlotW(width, 400, 0, xMax, 0, top)
	p.fitLegend(items)
	p.t += 20 // room for the step labels
	p.h += 20

	// each step's sessions on top of its span; where steps are too short for
	// their labels side by side, a label that would touch the one before
	// goes a row up, and where that row is taken too, only its tooltip says it
	starts := make([]float64, len(steps))
	rows := make([]int, len(steps))
	prevEnd := 0.0
	var last [2]float64 // right edge of the last label on each row
	twoRows := false
	last[0], last[1] = math.Inf(-1), math.Inf(-1)
	for i, st := range steps {
		starts[i] = st.StartS
		if starts[i] == 0 {
			starts[i] = prevEnd
		}
		prevEnd = st.EndS
		b := textBox(p.px((starts[i]+st.EndS)/2/div), 0, "middle", 14, true, fmt.Sprint(st.Sessions))
		rows[i] = -1
		for r := range last {
			if b.x0 >= last[r]+4 {
				rows[i], last[r] = r, b.x1
				break
			}
		}
		twoRows = twoRows || rows[i] == 1
	}
	if twoRows {
		p.t += 18
		p.h += 18
	}
	for i, st := range steps {
		start := starts[i]
		p.rect(start/div, st.MeasureStartS/div, 0, top, colWarmup, "")
		x := p.px(start / div)
		p.add(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#8c959f" stroke-width="1.2" stroke-dasharray="4 3"/>`+"\n", x, x, p.py(top)-18, p.py(0))
		mid := p.px((start + st.EndS) / 2 / div)
		p.add(`<g><title>%d sessions: %s</title>`, st.Sessions, esc(verdictWords(st.Verdict)))
		if rows[i] >= 0 {
			p.text(mid, p.py(top)-5-18*float64(rows[i]), "middle", `font-size="14" font-weight="700" fill="`+colInk+`"`, fmt.Sprint(st.Sessions))
		}
		p.add("</g>\n")
	}
	xt := niceTicks(0, xMax, max(4, int(12*width/chartW)))
	p.axes(xt, niceTicks(0, top, 5), tickLabel, tickLabel, "modelled time since the run started ("+unit+")", ylabel)

	if !have {
		// in as many lines as the plotting area's width needs
		lines := wrapText(missing, 17, true, p.w-p.l-p.r-24)
		y := (p.t+p.h-p.b)/2 - float64(len(lines)-1)*11
		for i, line := range lines {
			p.text((p.l+p.w-p.r)/2, y+float64(i)*22, "middle", `font-size="17" font-weight="600" fill="`+colMuted+`"`, line)
		}
	}
	cols := int(p.w - p.l - p.r)
	for _, l := range lines {
		pts := thin(series, l, cols)
		var sb strings.Builder
		seg := 0
		flush := func() {
			if seg > 1 {
				extra := ""
				if l.dash != "" {
					extra = fmt.Sprintf(` stroke-dasharray="%s"`, l.dash)
				}
				p.add(`<polyline points="%s" fill="none" stroke="%s" stroke-width="%.1f" stroke-linejoin="round"%s/>`+"\n", sb.String(), l.col, l.width, extra)
			}
			sb.Reset()
			seg = 0
		}
		for _, q := range pts {
			if q.missing { // a gap in the gauge breaks the line
				flush()
				continue
			}
			y, _ := p.clampY(q.v * l.scale)
			fmt.Fprintf(&sb, "%.1f,%.1f ", p.px(q.at/div), p.py(y))
			seg++
		}
		flush()
	}
	p.legend(items)
	return p.svg(title)
}

type thinPoint struct {
	at, v   float64
	missing bool
}

// thin keeps a line drawable: with more points than pixel columns, each
// column keeps its lowest and highest value, so spikes survive.
func thin(series []GaugePoint, l gaugeLine, columns int) []thinPoint {
	out := make([]thinPoint, 0, len(series))
	for _, g := range series {
		if v := l.value(g); v != nil {
			out = append(out, thinPoint{at: g.AtS, v: *v})
		} else {
			out = append(out, thinPoint{at: g.AtS, missing: true})
		}
	}
	if columns < 1 || len(out) <= 2*columns {
		return out
	}
	end := out[len(out)-1].at
	if end <= 0 {
		return out
	}
	kept := make([]thinPoint, 0, 2*columns)
	col := -1
	var lo, hi thinPoint
	emit := func() {
		if col < 0 {
			return
		}
		if lo.missing {
			kept = append(kept, lo)
			return
		}
		if lo.at <= hi.at {
			kept = append(kept, lo, hi)
		} else {
			kept = append(kept, hi, lo)
		}
	}
	for _, q := range out {
		c := int(q.at / end * float64(columns-1))
		if c != col {
			emit()
			col, lo, hi = c, q, q
			continue
		}
		switch {
		case q.missing:
			continue
		case lo.missing:
			lo, hi = q, q
		case q.v < lo.v:
			lo = q
		case q.v > hi.v:
			hi = q
		}
	}
	emit()
	return kept
}

func kvChart(r Run, width float64) string {
	return timeChart(r.Series, r.Summary.Steps, []gaugeLine{
		{label: "KV cache in use", value: func(g GaugePoint) *float64 { return g.KVCacheUsage }, scale: 100, col: colKV, width: 2.5},
	}, "KV cache in use (%)", "KV cache use over time", 100,
		"no KV cache gauge in metrics.jsonl: the engine did not report kv_cache_usage", width)
}

func queueChart(r Run, width float64) string {
	return timeChart(r.Series, r.Summary.Steps, []gaugeLine{
		{label: "running", value: func(g GaugePoint) *float64 { return g.Running }, scale: 1, col: colRunning, width: 2.2},
		{label: "waiting", value: func(g GaugePoint) *float64 { return g.Waiting }, scale: 1, col: colWaiting, dash: "8 4", width: 2.6},
	}, "requests", "Requests running and waiting over time", 0,
		"no running/waiting gauges in metrics.jsonl: the engine did not report its queue", width)
}
