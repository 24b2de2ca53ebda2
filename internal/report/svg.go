package report

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Colours of every rendering. Each verdict also has a shape and a word, so
// colour is never the only cue.
const (
	colInk       = "#1f2328" // text
	colMuted     = "#57606a" // secondary text, error bars
	colGrid      = "#d0d7de"
	colBand      = "#c6efd0" // the region within the bar
	colBarLine   = "#1a7f37"
	colBarText   = "#116329"
	colCurve     = "#0969da"
	colCapacity  = "#0969da"
	colWarmup    = "#e6e9ed"
	colKV        = "#8250df"
	colRunning   = "#0969da"
	colWaiting   = "#bc4c00"
	colPass      = "#1a7f37"
	colTooClose  = "#9a6700"
	colFail      = "#cf222e"
	colNoData    = "#6e7781"
	chartW       = 1160.0
	chartFont    = `font-family="system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', 'Liberation Sans', sans-serif"`
	legendHeight = 34.0
)

// plot is one SVG chart: a frame, data domain and the marks drawn into it.
type plot struct {
	w, h           float64
	l, r, t, b     float64 // margins around the plotting area
	x0, x1, y0, y1 float64 // data domain
	sb             strings.Builder
	taken          []box   // text and marks drawn so far, which labels keep clear of
	labels         []label // labels placed when the chart is finished
}

func newPlot(h, x0, x1, y0, y1 float64) *plot {
	return newPlotW(chartW, h, x0, x1, y0, y1)
}

// newPlotW is newPlot of a given width, e.g. for two charts side by side.
func newPlotW(w, h, x0, x1, y0, y1 float64) *plot {
	if x1 <= x0 {
		x1 = x0 + 1
	}
	if y1 <= y0 {
		y1 = y0 + 1
	}
	return &plot{w: w, h: h, l: 86, r: 36, t: 26 + legendHeight, b: 64, x0: x0, x1: x1, y0: y0, y1: y1}
}

// legendRowH is the height of one row of a legend.
const legendRowH = 22.0

// fitLegend makes room above the plotting area for every row the legend
// needs, keeping the plotting area's height; call it before drawing.
func (p *plot) fitLegend(items []legendItem) {
	if extra := float64(p.legendRows(items)-1) * legendRowH; extra > 0 {
		p.t += extra
		p.h += extra
	}
}

// legendRows is how many rows the items take at the plot's width.
func (p *plot) legendRows(items []legendItem) int {
	rows, x := 1, p.l
	for _, it := range items {
		w := legendItemW(it)
		if x+w > p.w-p.r && x > p.l {
			rows, x = rows+1, p.l
		}
		x += w + 12
	}
	return rows
}

func legendItemW(it legendItem) float64 { return 30 + textW(it.label, 14, false) }

func (p *plot) px(x float64) float64 { return p.l + (x-p.x0)/(p.x1-p.x0)*(p.w-p.l-p.r) }
func (p *plot) py(y float64) float64 { return p.h - p.b - (y-p.y0)/(p.y1-p.y0)*(p.h-p.t-p.b) }

// clampY keeps a value inside the domain, reporting whether it was cut.
func (p *plot) clampY(y float64) (float64, bool) {
	switch {
	case math.IsInf(y, 1) || y > p.y1:
		return p.y1, true
	case math.IsInf(y, -1) || y < p.y0:
		return p.y0, true
	}
	return y, false
}

func (p *plot) add(format string, args ...any) { fmt.Fprintf(&p.sb, format, args...) }

// rect fills a data-space rectangle, clipped to the plotting area.
func (p *plot) rect(x0, x1, y0, y1 float64, fill, extra string) {
	x0, x1 = math.Max(x0, p.x0), math.Min(x1, p.x1)
	y0, y1 = math.Max(y0, p.y0), math.Min(y1, p.y1)
	if x1 <= x0 || y1 <= y0 {
		return
	}
	p.add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"%s/>`+"\n",
		p.px(x0), p.py(y1), p.px(x1)-p.px(x0), p.py(y0)-p.py(y1), fill, extra)
}

// haloText is text with a white outline, readable over marks and bands.
func (p *plot) haloText(x, y float64, anchor, attrs, s string) {
	p.text(x, y, anchor, attrs+` stroke="#fff" stroke-width="4" stroke-linejoin="round" paint-order="stroke"`, s)
}

func (p *plot) text(x, y float64, anchor, attrs, s string) {
	size, bold := fontOf(attrs)
	p.occupy(textBox(x, y, anchor, size, bold, s))
	p.add(`<text x="%.1f" y="%.1f" text-anchor="%s" %s>%s</text>`+"\n", x, y, anchor, attrs, esc(s))
}

// axes draws the grid, ticks, tick labels and axis titles.
func (p *plot) axes(xticks, yticks []float64, xfmt, yfmt func(float64) string, xlabel, ylabel string) {
	bottom, top := p.h-p.b, p.t
	for _, y := range yticks {
		yy := p.py(y)
		p.add(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1"/>`+"\n", p.l, p.w-p.r, yy, yy, colGrid)
		p.text(p.l-10, yy+5, "end", `font-size="15" fill="`+colInk+`"`, yfmt(y))
	}
	// a tick's label that would come within 6 px of one already drawn (in
	// the order given: the steps run before a step not run) is left off,
	// where "15" and "16" would read as "1516"; its tick stays
	var labelled []box
	for _, x := range xticks {
		xx := p.px(x)
		p.add(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1"/>`+"\n", xx, xx, bottom, bottom+6, colInk)
		b := textBox(xx, bottom+24, "middle", 15, false, xfmt(x))
		clear := true
		for _, o := range labelled {
			clear = clear && (b.x0 >= o.x1+6 || o.x0 >= b.x1+6)
		}
		if clear {
			labelled = append(labelled, b)
			p.text(xx, bottom+24, "middle", `font-size="15" fill="`+colInk+`"`, xfmt(x))
		}
	}
	p.add(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`+"\n", p.l, p.w-p.r, bottom, bottom, colInk)
	p.add(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`+"\n", p.l, p.l, top, bottom, colInk)
	p.text((p.l+p.w-p.r)/2, p.h-12, "middle", `font-size="16" font-weight="600" fill="`+colInk+`"`, xlabel)
	cy := (top + bottom) / 2
	h := textW(ylabel, 16, true) / 2
	p.occupy(box{22 - 0.93*16, cy - h, 22 + 0.24*16, cy + h})
	p.add(`<text transform="translate(22 %.1f) rotate(-90)" text-anchor="middle" font-size="16" font-weight="600" fill="%s">%s</text>`+"\n", cy, colInk, esc(ylabel))
}

// legendItem is one entry of a chart's legend.
type legendItem struct {
	mark  string // SVG drawn in a 24x20 box at the origin
	label string
}

// legend draws the items in a row above the plotting area.
func (p *plot) legend(items []legendItem) {
	x, y := p.l, 16.0
	for _, it := range items {
		w := legendItemW(it)
		if x+w > p.w-p.r && x > p.l { // wrap onto the rows fitLegend made
			x, y = p.l, y+legendRowH
		}
		p.occupy(box{x, y - 4, x + 24, y + 16})
		p.add(`<g transform="translate(%.1f %.1f)">%s</g>`+"\n", x, y-4, it.mark)
		p.text(x+30, y+11, "start", `font-size="14" fill="`+colInk+`"`, it.label)
		x += w + 12
	}
}

// svg wraps the marks as a standalone, scalable SVG element.
func (p *plot) svg(label string) string {
	p.placeLabels()
	return fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="100%%" role="img" aria-label="%s" %s>`+"\n<title>%s</title>\n%s</svg>\n",
		p.w, p.h, esc(label), chartFont, esc(label), p.sb.String())
}

// marker draws a verdict's mark centred at (cx, cy): a circle for pass, a
// diamond for too close, a square for fail, a hollow circle for no data.
func marker(v string, cx, cy, r float64) string {
	switch v {
	case "pass":
		return fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s" stroke="#fff" stroke-width="1.5"/>`, cx, cy, r, colPass)
	case "too_close":
		return fmt.Sprintf(`<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s" stroke="#fff" stroke-width="1.5"/>`,
			cx, cy-r*1.3, cx+r*1.3, cy, cx, cy+r*1.3, cx-r*1.3, cy, colTooClose)
	case "fail":
		return fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" stroke="#fff" stroke-width="1.5"/>`, cx-r, cy-r, 2*r, 2*r, colFail)
	}
	return fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="#fff" stroke="%s" stroke-width="2.5"/>`, cx, cy, r-1, colNoData)
}

// triangle is the ▲ that marks a crossing, standing on (x, y): its base
// lies on the bar's line and its apex points up from it.
func triangle(x, y float64) string { return triangleCol(x, y, colInk) }

func triangleCol(x, y float64, col string) string {
	return fmt.Sprintf(`<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s" stroke="#fff" stroke-width="1"/>`, x, y-16, x+9, y, x-9, y, col)
}

// unknownMark is the "?" of a step not measured, centred at (cx, cy).
func unknownMark(cx, cy float64) string {
	return fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="9" fill="#fff" stroke="%s" stroke-width="1.8" stroke-dasharray="3 2"/><text x="%.1f" y="%.1f" text-anchor="middle" font-size="13" font-weight="700" fill="%s">?</text>`,
		cx, cy, colNoData, cx, cy+4.5, colNoData)
}

// hollowMarker is a verdict's shape drawn in outline: a run of a repeated
// step, whose verdict the pooled mark replaces.
func hollowMarker(v string, cx, cy, r float64) string {
	col := map[string]string{"pass": colPass, "too_close": colTooClose, "fail": colFail}[v]
	if col == "" {
		col = colNoData
	}
	switch v {
	case "too_close":
		return fmt.Sprintf(`<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="#fff" stroke="%s" stroke-width="2"/>`,
			cx, cy-r*1.3, cx+r*1.3, cy, cx, cy+r*1.3, cx-r*1.3, cy, col)
	case "fail":
		return fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#fff" stroke="%s" stroke-width="2"/>`, cx-r, cy-r, 2*r, 2*r, col)
	}
	return fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="#fff" stroke="%s" stroke-width="2"/>`, cx, cy, r, col)
}

func swatch(fill, stroke string) string {
	return fmt.Sprintf(`<rect x="0" y="2" width="24" height="16" fill="%s" stroke="%s"/>`, fill, stroke)
}

func lineMark(col, dash string, width float64) string {
	d := ""
	if dash != "" {
		d = fmt.Sprintf(` stroke-dasharray="%s"`, dash)
	}
	return fmt.Sprintf(`<line x1="0" x2="24" y1="10" y2="10" stroke="%s" stroke-width="%.1f"%s/>`, col, width, d)
}

func errorBarMark() string {
	return fmt.Sprintf(`<path d="M12 2 V18 M7 2 H17 M7 18 H17" stroke="%s" stroke-width="1.8" fill="none"/>`, colMuted)
}

// niceTicks returns round tick values covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) || n < 1 {
		return []float64{lo}
	}
	step := niceStep((hi - lo) / float64(n))
	var out []float64
	for v := math.Ceil(lo/step-1e-9) * step; v <= hi+step*1e-6; v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

func niceStep(raw float64) float64 {
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

// niceCeil rounds v up to the top tick of a nice axis.
func niceCeil(v float64, n int) float64 {
	if v <= 0 {
		return 1
	}
	step := niceStep(v / float64(n))
	return math.Ceil(v/step-1e-9) * step
}

// tickLabel prints a tick value without trailing zeros.
func tickLabel(v float64) string {
	if math.Abs(v) < 1e-9 {
		return "0"
	}
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

// num prints a measured value with sensible digits.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "no data"
	case math.IsInf(v, 1):
		return "∞"
	case math.IsInf(v, -1):
		return "-∞"
	case v == math.Trunc(v) && math.Abs(v) < 1e6:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 1:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
	}
	return fmt.Sprintf("%.3g", v)
}

func esc(s string) string { return html.EscapeString(s) }
