package report

import (
	"fmt"
	"math"
	"strings"
)

// hbar is one recipe's bar in a comparison chart.
type hbar struct {
	label         string
	center        float64
	lo, hi        float64
	atLeast, none bool
	text          string // the value as printed at the bar's end
}

// hbarChart draws one horizontal bar per recipe with its 95% interval as a
// whisker; a bar whose ceiling was not reached ends in an open arrow. Drawn
// narrower than chartW (for a narrow window), or with a name too long for
// the margin left of the bars, each recipe's name goes on its own line
// above its bar, so the bars keep the chart's width. The axis reaches far
// enough that every bar's value fits after it.
func hbarChart(bars []hbar, xlabel, title string, width float64) string {
	p := &plot{w: width, l: 280, r: 40, t: 20, b: 64, y0: 0, y1: 1}
	stacked := width < chartW
	for _, b := range bars {
		stacked = stacked || textW(b.label, 15, true) > p.l-24
	}
	rowH, nTicks := 46.0, 6
	if stacked {
		p.l, rowH = 24, 64
	}
	if width < chartW {
		nTicks = 4
	}
	plotW := p.w - p.l - p.r
	top := 0.0
	for _, b := range bars {
		if b.none {
			continue
		}
		reach := b.center
		if !b.atLeast && !math.IsInf(b.hi, 0) && !math.IsNaN(b.hi) {
			reach = math.Max(reach, b.hi)
		}
		after := 8 + textW(b.text, 15, true)
		if b.atLeast {
			after += 16
		}
		// the value ends 4 px inside the chart: p.l + reach/top*plotW + after <= p.w-4
		room := math.Max(p.w-4-p.l-after, 0.3*plotW)
		top = math.Max(top, math.Max(reach*1.15, reach*plotW/room))
	}
	top = niceCeil(math.Max(top, 1e-9), nTicks)
	p.x0, p.x1 = 0, top
	p.h = p.t + p.b + rowH*float64(len(bars))
	ticks := niceTicks(0, top, nTicks)
	bottom := p.h - p.b
	for _, x := range ticks {
		xx := p.px(x)
		p.add(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>`+"\n", xx, xx, p.t, bottom, colGrid)
		p.text(xx, bottom+24, "middle", `font-size="15" fill="`+colInk+`"`, tickLabel(x))
	}
	p.add(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`+"\n", p.l, p.w-p.r, bottom, bottom, colInk)
	p.add(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`+"\n", p.l, p.l, p.t, bottom, colInk)
	p.text((p.l+p.w-p.r)/2, p.h-12, "middle", `font-size="16" font-weight="600" fill="`+colInk+`"`, xlabel)
	for i, b := range bars {
		cy := p.t + rowH*(float64(i)+0.5)
		if stacked {
			cy += 10
			p.text(p.l+2, cy-22, "start", `font-size="15" font-weight="600" fill="`+colInk+`"`, b.label)
		} else {
			p.text(p.l-12, cy+5, "end", `font-size="15" font-weight="600" fill="`+colInk+`"`, b.label)
		}
		if b.none {
			p.text(p.l+10, cy+5, "start", `font-size="15" fill="`+colMuted+`"`, "n/a: no capacity measured")
			continue
		}
		x0, x1 := p.px(0), p.px(b.center)
		p.add(`<rect class="cmp-bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x0, cy-13, math.Max(x1-x0, 1), 26.0, colCurve)
		end := x1
		if b.atLeast {
			p.add(`<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"/>`+"\n", x1, cy-17, x1+16, cy, x1, cy+17, colCurve)
			end = x1 + 16
		} else if !math.IsNaN(b.lo) && !math.IsNaN(b.hi) {
			lo, hi := p.px(b.lo), p.px(math.Min(b.hi, top))
			p.add(`<path d="M%.1f %.1f H%.1f M%.1f %.1f V%.1f M%.1f %.1f V%.1f" stroke="%s" stroke-width="2" fill="none"/>`+"\n", lo, cy, hi, lo, cy-9, cy+9, hi, cy-9, cy+9, colInk)
			end = math.Max(end, hi)
		}
		p.haloText(end+8, cy+5, "start", `font-size="15" font-weight="700" fill="`+colInk+`"`, b.text)
	}
	return p.svg(title)
}

// compareBars turns each recipe's main run into bars scaled by per, e.g.
// per node or per dollar-hour.
func compareBars(rows []comparedRecipe, per func(Summary) float64, digits int) []hbar {
	var out []hbar
	for _, r := range rows {
		b := hbar{label: r.name}
		s := r.main
		if s == nil || (len(s.Steps) == 0 && s.Capacity.Sessions == 0) || per(*s) <= 0 {
			b.none = true
			out = append(out, b)
			continue
		}
		k := per(*s)
		c := s.Capacity
		b.center, b.lo, b.hi = c.Sessions/k, c.Lo/k, c.Hi/k
		f := func(v float64) string { return fmt.Sprintf("%.*f", digits, v) }
		switch {
		case c.AtLeast:
			b.atLeast, b.text = true, "≥ "+f(b.center)
		case c.BelowFirst:
			b.center, b.text = 0, fmt.Sprintf("below the first step (%d sessions)", firstStep(*s))
			b.lo, b.hi = math.NaN(), math.NaN()
		case c.NotEstablished:
			b.center, b.text = 0, fmt.Sprintf("not established (no step held; %d missed)", c.Bracket[1])
			b.lo, b.hi = math.NaN(), math.NaN()
		default:
			hi := f(b.hi)
			if c.HiOpen {
				hi = "≥" + hi
			}
			b.text = fmt.Sprintf("%s (%s–%s)", f(b.center), f(b.lo), hi)
		}
		out = append(out, b)
	}
	return out
}

// HTML is the comparison page: the table, every recipe's curves overlaid
// (the reference's figures 2 to 4) and sessions per node and per dollar
// (its figure 5). It is self-contained: no script, nothing fetched.
func (c Comparison) HTML() []byte {
	rows := c.rows
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<title>headroom: recipes compared</title>\n<style>" + pageCSS + "</style>\n</head>\n<body>\n<main>\n")
	b.WriteString("<h1>headroom: recipes compared</h1>\n")
	fmt.Fprintf(&b, "<p class=\"sub\">%d recipe(s). Every number comes from the server's own metrics, judged the same way for each recipe.</p>\n", len(rows))
	if len(c.TooCloseToCall) > 1 {
		fmt.Fprintf(&b, `<p class="barline" id="too-close" style="border-color:#9a6700"><strong>Too close to call:</strong> %s hold the target at $ per session-hour intervals that overlap; no recipe is starred.</p>`+"\n", esc(strings.Join(c.TooCloseToCall, " and ")))
	}
	b.WriteString(`<div class="scroll"><table id="comparison"><thead><tr>`)
	for i, h := range c.tableHead() {
		cls := ""
		if i == 0 || i == 3 {
			cls = ` class="l"`
		}
		fmt.Fprintf(&b, "<th%s>%s</th>", cls, esc(h))
	}
	b.WriteString("</tr></thead><tbody>\n")
	for i, r := range c.tableRows() {
		style := ""
		if c.Recipes[i].Best {
			style = ` style="background:#dafbe1"`
		}
		fmt.Fprintf(&b, "<tr%s>", style)
		for j, cell := range r {
			h := esc(cell)
			if j == 4 {
				h = targetBadge(cell)
			}
			cls := ""
			if j == 0 || j == 3 {
				cls = ` class="l"`
			}
			fmt.Fprintf(&b, "<td%s>%s</td>", cls, h)
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody></table></div>\n<ul class=\"plain note\">\n")
	for _, n := range c.Notes {
		fmt.Fprintf(&b, "<li>%s</li>\n", codeSpans(esc(n)))
	}
	b.WriteString("</ul>\n")

	for _, f := range overlayFigures(rows) {
		writeFigure(&b, f)
	}
	perNode := compareBars(rows, func(s Summary) float64 { return float64(s.Recipe.Nodes) }, 1)
	perDollar := compareBars(rows, func(s Summary) float64 { return s.Cost.USDPerHour / 100 }, 1)
	writeFigure(&b, figure{id: "chart-per-node", title: "Concurrent sessions at the bar per node",
		svg:     hbarChart(perNode, "concurrent sessions at the bar per node", "Concurrent sessions at the bar per node", chartW),
		narrow:  hbarChart(perNode, "concurrent sessions at the bar per node", "Concurrent sessions at the bar per node", halfW),
		caption: "Capacity divided by the recipe's nodes; the whisker is the 95% interval; an arrow means every step passed and the ceiling is higher."})
	writeFigure(&b, figure{id: "chart-per-dollar", title: "Concurrent sessions at the bar per $100 an hour",
		svg:     hbarChart(perDollar, "concurrent sessions at the bar per $100 of GPU time an hour", "Concurrent sessions at the bar per $100 an hour", chartW),
		narrow:  hbarChart(perDollar, "concurrent sessions at the bar per $100 of GPU time an hour", "Concurrent sessions at the bar per $100 an hour", halfW),
		caption: "Capacity divided by the recipe's hourly price, in hundreds of dollars: higher is more users for the money. It is 100 / ($ per session-hour)."})
	b.WriteString("<footer>Written by headroom compare. This page loads nothing from the network and runs no script.</footer>\n</main>\n</body>\n</html>\n")
	return []byte(b.String())
}

// targetBadge renders the target column's mark as a badge.
func targetBadge(c string) string {
	switch {
	case strings.HasPrefix(c, "✓"):
		return `<span class="badge v-pass">` + esc(c) + " held</span>"
	case strings.HasPrefix(c, "✗"):
		return `<span class="badge v-fail">` + esc(c) + " missed</span>"
	case strings.HasPrefix(c, "too close"):
		return `<span class="badge v-too_close">≈ ` + esc(c) + "</span>"
	case strings.HasPrefix(c, "no data"):
		return `<span class="badge v-no_data">? ` + esc(c) + "</span>"
	}
	return esc(c)
}

// codeSpans turns `x` in escaped text into <code>x</code>.
func codeSpans(s string) string {
	parts := strings.Split(s, "`")
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 1 && i < len(parts)-1 {
			b.WriteString("<code>" + p + "</code>")
			continue
		}
		if i%2 == 1 {
			b.WriteString("`")
		}
		b.WriteString(p)
	}
	return b.String()
}
