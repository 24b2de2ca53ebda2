package report

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// pv is a part's value as a test gives it: centre, interval and the
// histogram bucket holding the centre.
type pv struct{ c, lo, hi, b0, b1 float64 }

var testBar = verdict.Bar{TTFTP90: 5.3, InteractivityP90: 10, ErrorRate: 0.02}

// judgedStep is a sweep step judged by the verdict's rule: pass when the
// interval is within the bar, fail when it is wholly past it.
func judgedStep(idx, sessions int, ttft, inter, errs pv) sweep.StepResult {
	part := func(name string, v pv, bar float64, within func(float64) bool) verdict.Part {
		vd := verdict.TooClose
		switch {
		case math.IsNaN(v.c):
			vd = verdict.NoData
		case within(v.lo) && within(v.hi):
			vd = verdict.Pass
		case !within(v.lo) && !within(v.hi):
			vd = verdict.Fail
		}
		return verdict.Part{Name: name, Verdict: vd, Bar: bar, Margin: bar - v.c, Bucket: [2]float64{v.b0, v.b1},
			Value: stats.Summary{Center: v.c, Lo: v.lo, Hi: v.hi, Confidence: 0.95}}
	}
	parts := []verdict.Part{
		part("ttft", ttft, testBar.TTFTP90, func(x float64) bool { return x <= testBar.TTFTP90 }),
		part("interactivity", inter, testBar.InteractivityP90, func(x float64) bool { return x >= testBar.InteractivityP90 }),
		part("errors", errs, testBar.ErrorRate, func(x float64) bool { return x < testBar.ErrorRate }),
	}
	worst := verdict.Pass
	rank := map[verdict.Verdict]int{verdict.Pass: 0, verdict.TooClose: 1, verdict.NoData: 2, verdict.Fail: 3}
	for _, p := range parts {
		if rank[p.Verdict] > rank[worst] {
			worst = p.Verdict
		}
	}
	start := float64(idx) * 600
	return sweep.StepResult{Index: idx, Sessions: sessions, Start: start, MeasureStart: start + 60, End: start + 600, RepeatOf: -1,
		Judged: verdict.Step{Verdict: worst, Parts: parts, SentFraction: 1},
		Load:   sweep.LoadSummary{Planned: 20 * sessions, Sent: 20 * sessions, InFlightPerSession: 1}}
}

// summaryOf is the summary rig writes of these steps: capacity from the
// sweep's own rule, over the latest judgement at each number of sessions.
func summaryOf(results []sweep.StepResult, target int) Summary {
	s := Summary{Version: SummaryVersion, Bar: testBar, Recipe: Recipe{Name: "r", Engine: "vllm", Nodes: 2, GPUsPerNode: 8, USDPerGPUHour: 1.8}}
	for _, r := range results {
		s.Steps = append(s.Steps, StepOf(r))
	}
	s.Capacity = sweep.CapacityOf(sweep.Points(results))
	if target > 0 {
		t := s.Capacity.Target(target)
		s.Target = &t
	}
	s.Cost = sweep.CostOf(2, 8, 1.8, s.Capacity, sweep.Tokens{}, 0)
	s.Collect(nil)
	return s
}

// simLadder is the default simulated run's ladder (sim-recipe-0): 8 and 12
// sessions were repeated, each repeat judged on both runs pooled.
func simLadder() []sweep.StepResult {
	ok := pv{0, 0, 0.01, 0, 0}
	return []sweep.StepResult{
		judgedStep(0, 4, pv{2.52, 1.47, 5, 2.5, 5}, pv{20.7, 20, 40, 20, 40}, ok),
		judgedStep(1, 8, pv{1.34, 0.94, 2.5, 1, 2.5}, pv{13.6, 13.3, 20, 13.3, 20}, ok),
		judgedStep(2, 12, pv{15.6, 9.75, 20, 10, 20}, pv{5.1, 3.8, 6.9, 5, 6.7}, ok),
		judgedStep(3, 8, pv{1.486, 1, 2.5, 1, 2.5}, pv{13.8, 13.3, 20, 13.3, 20}, ok),
		judgedStep(4, 12, pv{17.0, 10, 22.9, 10, 20}, pv{4.7, 3.3, 6.7, 3.3, 5}, ok),
	}
}

var (
	svgRe       = regexp.MustCompile(`(?s)<svg .*?</svg>`)
	barLineRe   = regexp.MustCompile(`<line [^>]*y1="([0-9.]+)"[^>]*stroke="#1a7f37" stroke-width="2.5"`)
	crossingRe  = regexp.MustCompile(`(?s)<g class="crossing"[^>]*>.*?<polygon points="([^"]+)"`)
	crossWordRe = regexp.MustCompile(`crosses the bar at ≈ ([0-9.]+)`)
	curveRe     = regexp.MustCompile(`<polyline[^>]*points="([^"]+)"[^>]*stroke="#0969da"`)
)

// narrowRe is a chart's second drawing, for windows of 760 px or less.
var narrowRe = regexp.MustCompile(`(?s)<div class="chart narrow">.*?</svg>\s*</div>`)

// wideOnly is the page without the charts drawn for narrow windows.
func wideOnly(page string) string { return narrowRe.ReplaceAllString(page, "") }

func chartOf(t *testing.T, page string, i int) string {
	t.Helper()
	svgs := svgRe.FindAllString(wideOnly(page), -1)
	if len(svgs) <= i {
		t.Fatalf("the page has %d charts, want chart %d", len(svgs), i)
	}
	return svgs[i]
}

func points(t *testing.T, s string) [][2]float64 {
	t.Helper()
	var out [][2]float64
	for _, f := range strings.Fields(s) {
		xy := strings.Split(f, ",")
		x, err1 := strconv.ParseFloat(xy[0], 64)
		y, err2 := strconv.ParseFloat(xy[1], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad point %q", f)
		}
		out = append(out, [2]float64{x, y})
	}
	return out
}

// TestCrossingSitsOnTheBarAtCapacity: the ▲ on the TTFT chart read 9.1
// while the capacity card read 9.0 (the chart interpolated from the first
// run of the repeated 12-session step, the sweep from the pooled one), and
// it hung below the bar's line.
func TestCrossingSitsOnTheBarAtCapacity(t *testing.T) {
	s := summaryOf(simLadder(), 8)
	chart := map[string]int{"ttft": 0, "interactivity": 1}
	idx, ok := chart[s.Capacity.LimitedBy]
	if !ok {
		t.Fatalf("capacity %+v, want it limited by ttft or interactivity", s.Capacity)
	}
	page := string(HTML(Run{Summary: s}))
	capV, _ := capacityWords(s.Capacity)
	want := num1(s.Capacity.Sessions)
	if capV != want+" sessions" || !strings.Contains(page, capV) {
		t.Fatalf("the capacity card reads %q, want %q on the page", capV, want+" sessions")
	}
	svg := chartOf(t, page, idx)
	m := crossWordRe.FindStringSubmatch(svg)
	if m == nil || m[1] != want {
		t.Errorf("the %s chart's ▲ says %v, the capacity card %s", s.Capacity.LimitedBy, m, want)
	}
	bl := barLineRe.FindStringSubmatch(svg)
	cr := crossingRe.FindStringSubmatch(svg)
	if bl == nil || cr == nil {
		t.Fatalf("no bar line (%v) or crossing (%v) in the %s chart", bl, cr, s.Capacity.LimitedBy)
	}
	by, _ := strconv.ParseFloat(bl[1], 64)
	minY, maxY := math.Inf(1), math.Inf(-1)
	for _, p := range points(t, cr[1]) {
		minY, maxY = math.Min(minY, p[1]), math.Max(maxY, p[1])
	}
	if math.Abs(maxY-by) > 0.11 || minY >= by {
		t.Errorf("the ▲ spans y %.1f–%.1f, the bar's line is at %.1f: want its base on the line and its apex above it", minY, maxY, by)
	}
	// ... at the capacity's sessions
	if !strings.Contains(svg, `data-sessions="`+want+`"`) {
		t.Errorf("the crossing is not marked at %s sessions", want)
	}
}

// TestRepeatedStepsHaveTheirOwnMarker: the line went through both runs of
// a repeated step (straight up and down at 8 and 12 sessions); it goes
// through the pooled value, and the first run is drawn on its own, with a
// legend entry.
func TestRepeatedStepsHaveTheirOwnMarker(t *testing.T) {
	s := summaryOf(simLadder(), 8)
	svg := chartOf(t, string(HTML(Run{Summary: s})), 0)
	var xs []float64
	for _, m := range curveRe.FindAllStringSubmatch(svg, -1) {
		for _, p := range points(t, m[1]) {
			for _, x := range xs {
				if math.Abs(x-p[0]) < 0.5 {
					t.Errorf("the line has two points at x=%.1f: it goes through both runs of a repeated step", x)
				}
			}
			xs = append(xs, p[0])
		}
	}
	if len(xs) != 3 {
		t.Errorf("the line has %d points, want one per number of sessions (3)", len(xs))
	}
	if n := strings.Count(svg, `class="first-run"`); n != 2 {
		t.Errorf("%d first runs drawn, want 2 (8 and 12 sessions)", n)
	}
	if !strings.Contains(svg, "first run of a repeated step") {
		t.Error("the legend does not explain the repeated step's first run")
	}
	if !strings.Contains(svg, "8 sessions, both runs pooled: ttft pass, 1.49 s") {
		t.Error("the pooled mark at 8 sessions does not say it pools both runs (1.49 s)")
	}
}

// TestUnmeasuredStepsAreDashedWithQuestionMark: the reference draws a step
// that was not measured dashed, with "?": a step that read no data, and
// the next step up when every step passed.
func TestUnmeasuredStepsAreDashedWithQuestionMark(t *testing.T) {
	ok := pv{0, 0, 0.01, 0, 0}
	nan := pv{math.NaN(), math.NaN(), math.NaN(), 0, 0}
	allPass := summaryOf([]sweep.StepResult{
		judgedStep(0, 4, pv{1, 0.8, 1.2, 0, 0}, pv{30, 28, 32, 0, 0}, ok),
		judgedStep(1, 8, pv{2, 1.8, 2.2, 0, 0}, pv{25, 23, 27, 0, 0}, ok),
	}, 0)
	svg := chartOf(t, string(HTML(Run{Summary: allPass})), 0)
	if !allPass.Capacity.AtLeast {
		t.Fatalf("capacity %+v, want every step passed", allPass.Capacity)
	}
	if !strings.Contains(svg, `<title>12 sessions: not run</title>`) || !strings.Contains(svg, `>?</text>`) || !strings.Contains(svg, `class="unmeasured"`) {
		t.Error("every step passed, yet the next step (12) is not drawn dashed with a ?")
	}

	gap := summaryOf([]sweep.StepResult{
		judgedStep(0, 4, pv{1, 0.8, 1.2, 0, 0}, pv{30, 28, 32, 0, 0}, ok),
		judgedStep(1, 8, nan, pv{25, 23, 27, 0, 0}, ok),
		judgedStep(2, 12, pv{9, 8, 10, 0, 0}, pv{8, 7, 9, 0, 0}, ok),
	}, 0)
	page := string(HTML(Run{Summary: gap}))
	svg = chartOf(t, page, 0)
	if !strings.Contains(svg, "8 sessions: ttft not measured") || !strings.Contains(svg, `>?</text>`) {
		t.Error("the step without TTFT is not drawn as a ?")
	}
	// no solid line bridges the step without data
	p := newPlot(440, 0, 12+math.Max(1, 0.05*12), 0, 1)
	x8 := p.px(8)
	for _, m := range curveRe.FindAllStringSubmatch(svg, -1) {
		pts := points(t, m[1])
		for i := 1; i < len(pts); i++ {
			if pts[i-1][0] < x8 && pts[i][0] > x8 {
				t.Errorf("a solid line runs from x=%.1f to %.1f across the unmeasured step at %.1f", pts[i-1][0], pts[i][0], x8)
			}
		}
	}
	if n := strings.Count(svg, `class="unmeasured"`); n != 2 {
		t.Errorf("%d dashed segments, want 2: into and out of the step without data", n)
	}

	// the last step read no data: it is the ?, and no step past it is drawn
	end := summaryOf([]sweep.StepResult{
		judgedStep(0, 4, pv{1, 0.8, 1.2, 0, 0}, pv{30, 28, 32, 0, 0}, ok),
		judgedStep(1, 8, pv{2, 1.8, 2.2, 0, 0}, pv{25, 23, 27, 0, 0}, ok),
		judgedStep(2, 12, nan, pv{20, 18, 22, 0, 0}, ok),
	}, 0)
	if !end.Capacity.HiOpen {
		t.Fatalf("capacity %+v, want an open upper end", end.Capacity)
	}
	svg = chartOf(t, string(HTML(Run{Summary: end})), 0)
	if !strings.Contains(svg, "12 sessions: ttft not measured") || strings.Contains(svg, "not run") || strings.Count(svg, `class="unmeasured"`) != 1 {
		t.Error("a last step without data is not drawn as the one dashed ?, or a step past it is drawn as not run")
	}
}

// TestBucketWideIntervalSaysSo: an interval that is exactly the histogram
// bucket holding the P90 looked like a measured spread; the chart says it
// is the bucket.
func TestBucketWideIntervalSaysSo(t *testing.T) {
	s := summaryOf(simLadder(), 8)
	page := string(HTML(Run{Summary: s}))
	ttft, inter := chartOf(t, page, 0), chartOf(t, page, 1)
	// TTFT: the pooled 8 sessions' interval is its bucket, 1–2.5 s; the
	// others are wider than theirs (1.47–5 of 2.5–5, 10–22.9 of 10–20)
	if n := strings.Count(ttft, `class="bucket-wide"`); n != 1 {
		t.Errorf("the TTFT chart marks %d intervals as a bucket, want 1 (the pooled 8)", n)
	}
	if !strings.Contains(ttft, "interval = one histogram bucket") || !strings.Contains(ttft, ">bucket</text>") {
		t.Error("the TTFT chart does not say which intervals are one histogram bucket")
	}
	if !strings.Contains(ttft, "the interval 1–2.5 s is the histogram bucket holding the P90") {
		t.Error("the bucket-wide interval at 8 sessions does not name its bucket")
	}
	if n := strings.Count(inter, `class="bucket-wide"`); n != 2 {
		t.Errorf("the interactivity chart marks %d intervals as a bucket, want 2 (20–40 at 4, 13.3–20 at 8)", n)
	}
}
