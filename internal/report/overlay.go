package report

import (
	"fmt"
	"math"
)

// recipeColours tell the recipes apart in an overlay (Okabe and Ito's
// colour-blind-safe set, less its yellow); each recipe also has its own
// marker shape and is named at the end of its line.
var recipeColours = []string{"#0072b2", "#d55e00", "#cc79a7", "#e69f00", "#000000", "#56b4e9", "#8250df", "#009e73"}

// overlaid is one recipe's ladder in an overlay chart.
type overlaid struct {
	name string
	s    Summary
}

// overlayChart draws every recipe's curve of one part against sessions on
// one chart, as the reference's figures 2 to 4 do: the bar as a green band,
// each recipe's line through its pooled steps with its 95% intervals, a
// dashed "?" where a step was not measured or the next step was not run,
// and ▲ on the bar's line, in the recipe's colour, where it crosses (at its
// capacity for the part that limited it).
func overlayChart(runs []overlaid, m stepMetric, title string, width float64) string {
	maxS := 1.0
	var all []Step
	type prepared struct {
		curve []Step
		extX  float64
		ext   bool
	}
	var prep []prepared
	for _, r := range runs {
		curve, _ := pooled(r.s.Steps)
		x, ext := unrun(curve, r.s.Capacity, m)
		for _, st := range curve {
			maxS = math.Max(maxS, float64(st.Sessions))
		}
		if ext {
			maxS = math.Max(maxS, x)
		}
		all = append(all, curve...)
		prep = append(prep, prepared{curve, x, ext})
	}
	// room right of the last step for each line's name
	longest := ""
	for _, r := range runs {
		if textW(r.name, 14, true) > textW(longest, 14, true) {
			longest = r.name
		}
	}
	plotW := width - 86 - 36
	frac := math.Min(0.35, (30+textW(longest, 14, true))/plotW)
	xMax := math.Max(maxS+math.Max(1.5, 0.1*maxS), maxS/(1-frac))
	var legend []legendItem
	for i, r := range runs {
		col := recipeColours[i%len(recipeColours)]
		legend = append(legend, legendItem{lineMark(col, "", 2.2) + shapeMark(i, 12, 10, col), r.name})
	}
	legend = append(legend,
		legendItem{lineMark(colMuted, "6 5", 2) + unknownMark(12, 10), "not measured"},
		legendItem{swatch(colBand, colBarLine), "within the bar"},
		legendItem{triangle(12, 18), "crosses the bar"},
	)
	g := sessionsPlot(m, width, 460, all, xMax, legend)
	p := g.p
	xt := sessionTicks(all, xMax)
	for _, pr := range prep {
		if pr.ext && len(xt) <= 16 && !containsF(xt, pr.extX) {
			xt = append(xt, pr.extX)
		}
	}
	p.axes(xt, niceTicks(0, g.top, 5), tickLabel, tickLabel, "concurrent sessions", m.ylabel)
	by := g.barLine(m)
	for i, r := range runs {
		col := recipeColours[i%len(recipeColours)]
		pr := prep[i]
		pts, endX, endY := g.drawCurve(m, pr.curve, col, pr.extX, pr.ext)
		p.add(`<g class="recipe" data-recipe="%s">`+"\n", esc(r.name))
		for _, q := range pts {
			v := m.value(q.st)
			if !math.IsNaN(v.Lo) && !math.IsNaN(v.Hi) {
				lo, _ := p.clampY(v.Lo * m.scale)
				hi, _ := p.clampY(v.Hi * m.scale)
				p.add(`<path d="M%.1f %.1f V%.1f" stroke="%s" stroke-width="1.4" stroke-opacity="0.6"/>`+"\n", q.x, p.py(lo), p.py(hi), col)
			}
			tip := fmt.Sprintf("%s, %d sessions: %s %s, %s %s (95%% interval %s–%s)", r.name, q.st.Sessions, m.id, verdictWords(m.verdictOf(q.st)),
				num(v.Center*m.scale), m.unit, num(v.Lo*m.scale), num(v.Hi*m.scale))
			p.add(`<g><title>%s</title>%s</g>`+"\n", esc(tip), shapeMark(i, q.x, q.y, col))
		}
		if len(pr.curve) > 0 {
			p.label(endX+14, endY+5, "start", `font-size="14" font-weight="700" fill="`+col+`"`, r.name)
		}
		p.add("</g>\n")
		if at, ok := crossing(r.s, pr.curve, m); ok {
			x := p.px(at)
			p.add(`<g class="crossing" data-recipe="%s" data-sessions="%s"><title>%s crosses the bar at ≈ %s sessions</title>%s</g>`+"\n",
				esc(r.name), num1(at), esc(r.name), num1(at), triangleCol(x, by, col))
			// above the line where the band is below it, and the other way
			// round; a label in the way stacks them
			labelY, dir := by-22, -1
			if m.higherIsBetter {
				labelY, dir = by+20, 1
			}
			p.keyLabel(dir, x, labelY, "middle", `font-size="13" font-weight="700" fill="`+col+`"`, num1(at))
		}
	}
	p.legend(legend)
	return p.svg(title)
}

func containsF(xs []float64, v float64) bool {
	for _, x := range xs {
		if x == v {
			return true
		}
	}
	return false
}

// overlayFigures are the comparison's curves: P90 TTFT on each recipe's
// main mix (the reference's figure 2), on light-only runs where any were
// given (figure 3), and P90 interactivity on the main mix (figure 4).
func overlayFigures(rows []comparedRecipe) []figure {
	var mainRuns, lightRuns []overlaid
	for _, r := range rows {
		if r.main != nil && len(r.main.Steps) > 0 {
			mainRuns = append(mainRuns, overlaid{r.name, *r.main})
		}
		if r.light != nil && len(r.light.Steps) > 0 {
			lightRuns = append(lightRuns, overlaid{r.name, *r.light})
		}
	}
	var out []figure
	metric := func(runs []overlaid, i int) stepMetric { return stepMetrics(runs[0].s)[i] }
	if len(mainRuns) > 0 {
		out = append(out, figure{id: "chart-cmp-ttft", title: "P90 TTFT as concurrent sessions step up, per recipe",
			caption: "Each recipe's P90 TTFT on its mix, its line through the pooled value of a repeated step, the whisker its 95% interval; the green band is the bar, a dashed ? is a step not measured or not run, and ▲ marks where each recipe crosses the bar (its capacity, where TTFT limited it).",
			svg:     overlayChart(mainRuns, metric(mainRuns, 0), "P90 TTFT against concurrent sessions, per recipe", chartW),
			narrow:  overlayChart(mainRuns, metric(mainRuns, 0), "P90 TTFT against concurrent sessions, per recipe", halfW)})
	}
	if len(lightRuns) > 0 {
		out = append(out, figure{id: "chart-cmp-ttft-light", title: "The same for light-only sessions",
			caption: "P90 TTFT of each recipe's light-only run, for comparison.",
			svg:     overlayChart(lightRuns, metric(lightRuns, 0), "P90 TTFT against concurrent light-only sessions, per recipe", chartW),
			narrow:  overlayChart(lightRuns, metric(lightRuns, 0), "P90 TTFT against concurrent light-only sessions, per recipe", halfW)})
	}
	if len(mainRuns) > 0 {
		out = append(out, figure{id: "chart-cmp-interactivity", title: "P90 interactivity as concurrent sessions step up, per recipe",
			caption: "The tokens/s per user that 90% of streams beat, at every load each recipe ran. Higher is better; the green band is the bar.",
			svg:     overlayChart(mainRuns, metric(mainRuns, 1), "P90 interactivity against concurrent sessions, per recipe", chartW),
			narrow:  overlayChart(mainRuns, metric(mainRuns, 1), "P90 interactivity against concurrent sessions, per recipe", halfW)})
	}
	return out
}
