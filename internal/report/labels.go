package report

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// A chart's text is laid out before it is drawn, so no label covers
// another: the axes', the legend's and other fixed text take their place
// as drawn (plot.text), and the labels that point at data (plot.label: an
// off-chart value, a crossing, the capacity) are placed last, each moved a
// line down or up, nearest first, until it meets no text already placed.
// Widths are those of DejaVu Sans, the widest of the fonts the charts
// name, so in a narrower font the labels only stand further apart.

// box is a rectangle in the chart's coordinates.
type box struct{ x0, y0, x1, y1 float64 }

// overlap is the area two boxes share.
func (a box) overlap(b box) float64 {
	dx := math.Min(a.x1, b.x1) - math.Max(a.x0, b.x0)
	dy := math.Min(a.y1, b.y1) - math.Max(a.y0, b.y0)
	if dx <= 0 || dy <= 0 {
		return 0
	}
	return dx * dy
}

// glyphW are advance widths of DejaVu Sans Book in em, by character class.
var glyphW = map[rune]float64{
	' ': 0.318, '.': 0.318, ',': 0.318, ':': 0.337, ';': 0.337, '!': 0.4, '\'': 0.275, '"': 0.46,
	'(': 0.39, ')': 0.39, '[': 0.39, ']': 0.39, '/': 0.337, '|': 0.337, '-': 0.361, '_': 0.5,
	'%': 0.95, '+': 0.838, '=': 0.838, '<': 0.838, '>': 0.838, '#': 0.838, '&': 0.78, '?': 0.531, '$': 0.636,
	'–': 0.5, '—': 1, '≈': 0.838, '≥': 0.838, '≤': 0.838, '↑': 0.838, '▲': 0.77, '·': 0.318, '×': 0.838,
	'f': 0.352, 'i': 0.278, 'j': 0.278, 'l': 0.278, 'r': 0.411, 't': 0.392, 's': 0.521, 'z': 0.525, 'c': 0.55,
	'm': 0.974, 'w': 0.818, 'I': 0.295, 'J': 0.295, 'M': 0.863, 'W': 0.989,
}

// textW estimates how wide s is drawn at size px; bold text (weight 600
// and up, which DejaVu draws bold) is about a tenth wider.
func textW(s string, size float64, bold bool) float64 {
	w := 0.0
	for _, r := range s {
		g, ok := glyphW[r]
		switch {
		case ok:
		case r >= '0' && r <= '9':
			g = 0.636
		case r >= 'A' && r <= 'Z':
			g = 0.72
		case r >= 'a' && r <= 'z':
			g = 0.62
		default:
			g = 0.84
		}
		w += g
	}
	if bold {
		w *= 1.12
	}
	return w * size * 1.03
}

// textBox is the box text drawn at (x, y), its baseline, takes: DejaVu's
// ascent and descent are 0.93 and 0.24 em.
func textBox(x, y float64, anchor string, size float64, bold bool, s string) box {
	w := textW(s, size, bold)
	x0 := x
	switch anchor {
	case "end":
		x0 = x - w
	case "middle":
		x0 = x - w/2
	}
	return box{x0, y - 0.93*size, x0 + w, y + 0.24*size}
}

// fontOf reads the size and boldness from a text's attributes.
func fontOf(attrs string) (size float64, bold bool) {
	size = 16
	if i := strings.Index(attrs, `font-size="`); i >= 0 {
		rest := attrs[i+len(`font-size="`):]
		if v, err := strconv.ParseFloat(rest[:strings.IndexByte(rest, '"')], 64); err == nil {
			size = v
		}
	}
	if i := strings.Index(attrs, `font-weight="`); i >= 0 {
		rest := attrs[i+len(`font-weight="`):]
		w, _ := strconv.Atoi(rest[:strings.IndexByte(rest, '"')])
		bold = w >= 600 || strings.HasPrefix(rest, "bold")
	}
	return size, bold
}

// label is text that points at data and may move off its line to stay clear.
type label struct {
	x, y          float64
	anchor, attrs string
	s             string
	key           bool // placed before the others
	dir           int  // the way it may move: 0 either, 1 down only, -1 up only
}

// occupy marks a box as taken by text or a mark drawn in it.
func (p *plot) occupy(b box) { p.taken = append(p.taken, b) }

// label queues a haloed label at (x, y); svg places it.
func (p *plot) label(x, y float64, anchor, attrs, s string) {
	p.labels = append(p.labels, label{x: x, y: y, anchor: anchor, attrs: attrs, s: s})
}

// keyLabel is a label placed before the others: what the chart is read
// for (the capacity, where a line crosses the bar) keeps its line. dir
// keeps it on one side of where it points: 1 moves it only down, -1 only
// up, 0 either way.
func (p *plot) keyLabel(dir int, x, y float64, anchor, attrs, s string) {
	p.labels = append(p.labels, label{x: x, y: y, anchor: anchor, attrs: attrs, s: s, key: true, dir: dir})
}

// placeLabels draws the queued labels, in the order queued, each at the
// nearest line (down, then up, a line at a time) where it meets no text
// already placed, inside the chart and between the plotting area's top and
// the x axis. Where no line is clear, the least covered one is taken.
func (p *plot) placeLabels() {
	const pad = 1.0
	sort.SliceStable(p.labels, func(i, j int) bool { return p.labels[i].key && !p.labels[j].key })
	for _, l := range p.labels {
		size, bold := fontOf(l.attrs)
		step := math.Ceil(1.17*size + 2*pad)
		x := l.x
		if b := textBox(x, l.y, l.anchor, size, bold, l.s); b.x1 > p.w-2 {
			x -= b.x1 - (p.w - 2)
		} else if b.x0 < 2 {
			x += 2 - b.x0
		}
		best, bestCover := 0.0, math.Inf(1)
		for k := 0; k <= 24 && bestCover > 0; k++ {
			dy := float64((k+1)/2) * step
			switch {
			case l.dir != 0:
				dy = float64(k*l.dir) * step
			case k%2 == 0:
				dy = -dy
			}
			b := textBox(x, l.y+dy, l.anchor, size, bold, l.s)
			if b.y0 < p.t-4 || b.y1 > p.h-p.b || b.x0 < 0 || b.x1 > p.w {
				continue
			}
			b = box{b.x0 - pad, b.y0 - pad, b.x1 + pad, b.y1 + pad}
			cover := 0.0
			for _, t := range p.taken {
				cover += b.overlap(t)
			}
			if cover < bestCover {
				best, bestCover = dy, cover
			}
		}
		p.haloText(x, l.y+best, l.anchor, l.attrs, l.s)
	}
	p.labels = nil
}

// wrapText breaks s at spaces into lines no wider than w; a word wider
// than w has a line of its own.
func wrapText(s string, size float64, bold bool, w float64) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		next := word
		if line != "" {
			next = line + " " + word
		}
		if line != "" && textW(next, size, bold) > w {
			lines = append(lines, line)
			next = word
		}
		line = next
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
