package report

import (
	"fmt"
	"math"

	"github.com/headroom-bench/headroom/internal/verdict"
)

// A part's values read in its own unit: TTFT in seconds, interactivity in
// tokens/s per user, and every other part (errors, tool calls under load)
// as a share of turns, in percent: never "bar 0.02".

func partIsShare(name string) bool {
	return name != verdict.PartTTFT && name != verdict.PartInteractivity
}

func partUnit(name string) string {
	switch name {
	case verdict.PartTTFT:
		return " s"
	case verdict.PartInteractivity:
		return " tokens/s"
	}
	return "%"
}

// partNum prints one of the part's values without its unit.
func partNum(name string, v float64) string {
	if partIsShare(name) && !math.IsNaN(v) && !math.IsInf(v, 0) {
		return fmt.Sprintf("%.2f", v*100)
	}
	return num(v)
}

// partValue is the part's centre with its unit, or "no data".
func partValue(p verdict.Part) string {
	if math.IsNaN(p.Value.Center) {
		return "no data"
	}
	return partNum(p.Name, p.Value.Center) + partUnit(p.Name)
}

// partInterval is the part's 95% interval with its unit, or "no data".
func partInterval(p verdict.Part) string {
	if math.IsNaN(p.Value.Center) || math.IsNaN(p.Value.Lo) || math.IsNaN(p.Value.Hi) {
		return "no data"
	}
	if why := p.Open(); why != "" {
		// the kill switch ended the run, or the engine was at its limit:
		// the truth may lie past the interval on the bad side
		// (verdict.Part.Bounds)
		if p.Name == verdict.PartInteractivity {
			return "≤ " + partNum(p.Name, p.Value.Hi) + partUnit(p.Name) + " (" + why + ")"
		}
		return "≥ " + partNum(p.Name, p.Value.Lo) + partUnit(p.Name) + " (" + why + ")"
	}
	return partNum(p.Name, p.Value.Lo) + "–" + partNum(p.Name, p.Value.Hi) + partUnit(p.Name)
}

// partBar is the part's bar as a rule: "≤ 5.3 s", "≥ 10 tokens/s", "< 2%".
func partBar(p verdict.Part) string {
	switch {
	case p.Name == verdict.PartTTFT:
		return "≤ " + num(p.Bar) + " s"
	case p.Name == verdict.PartInteractivity:
		return "≥ " + num(p.Bar) + " tokens/s"
	case p.Name == verdict.PartErrors:
		return "< " + num(p.Bar*100) + "%"
	}
	return "≤ " + num(p.Bar*100) + "%"
}

// partMargin is the room left before the bar (negative: past it), in the
// part's unit; a share's margin is in percentage points.
func partMargin(p verdict.Part) string {
	if math.IsNaN(p.Margin) || math.IsInf(p.Margin, 0) {
		return "–"
	}
	if partIsShare(p.Name) {
		return fmt.Sprintf("%+.2f points", p.Margin*100)
	}
	return fmt.Sprintf("%+.3g%s", p.Margin, partUnit(p.Name))
}

// partLine is one part in a line: "errors: too close to call, 0.00%
// (95% interval 0.00–2.51%), bar < 2%, from http_4xx + ...".
func partLine(p verdict.Part) string {
	out := fmt.Sprintf("%s: %s, %s", p.Name, verdictWords(p.Verdict), partValue(p))
	if iv := partInterval(p); iv != "no data" {
		out += " (95% interval " + iv + ")"
	}
	out += ", bar " + partBar(p)
	if p.Source != "" {
		out += ", from " + p.Source
	}
	return out
}
