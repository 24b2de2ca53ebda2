package report

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/sweep"
)

// chartText is what the browser laid out of one chart: its text elements'
// boxes, in CSS pixels of the window.
type chartText struct {
	Label string      `json:"label"` // the chart's aria-label
	Scale float64     `json:"scale"` // rendered px per viewBox unit
	Box   [4]float64  `json:"box"`   // the chart's left, top, right, bottom
	Texts []laidOutTx `json:"texts"`
}

type laidOutTx struct {
	S    string     `json:"s"`
	Box  [4]float64 `json:"box"`
	Font float64    `json:"font"` // rendered font size, px
}

// textProbe is added to a copy of the page (the page itself has no
// script): for every chart the window shows, each text element's bounding
// box as laid out and its font size as rendered (the size in the drawing
// times the chart's scale), written into a <pre> that --dump-dom returns.
const textProbe = `<pre id="text-probe"></pre><script>(function(){var out=[];` +
	`document.querySelectorAll("main svg").forEach(function(svg){var b=svg.getBoundingClientRect();if(b.width<1||b.height<1)return;` +
	`var vb=svg.viewBox.baseVal,scale=vb&&vb.width?b.width/vb.width:1,texts=[];` +
	`svg.querySelectorAll("text").forEach(function(t){var r=t.getBoundingClientRect();if(r.width<0.5||r.height<0.5)return;` +
	`texts.push({s:t.textContent,box:[r.left,r.top,r.right,r.bottom],font:parseFloat(getComputedStyle(t).fontSize)*scale});});` +
	`out.push({label:svg.getAttribute("aria-label")||"",scale:scale,box:[b.left,b.top,b.right,b.bottom],texts:texts});});` +
	`document.getElementById("text-probe").textContent=JSON.stringify(out);})();</script></body>`

var textProbeRe = regexp.MustCompile(`(?s)<pre id="text-probe">(.*?)</pre>`)

// layOutCharts loads a copy of the page in headless Chromium at the given
// window width and returns the charts it shows. The timeout only guards
// against a hung browser.
func layOutCharts(t *testing.T, page string, width int) []chartText {
	t.Helper()
	bin := chromiumPath()
	if bin == "" {
		t.Skip("chromium is not installed, so the charts' text cannot be checked: apt-get install -y chromium")
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	copyPath := filepath.Join(tmp, "page.html")
	if err := os.WriteFile(copyPath, []byte(strings.Replace(string(b), "</body>", textProbe, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(tmp, "profile"), "--window-size="+itoa(width)+",1000", "--dump-dom", "file://"+copyPath)
	cmd.Env = append(os.Environ(), "HOME="+tmp)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium failed: %v", err)
	}
	m := textProbeRe.FindSubmatch(out)
	if m == nil || len(m[1]) == 0 {
		t.Fatalf("the probe did not run: %.300s", out)
	}
	var charts []chartText
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &charts); err != nil {
		t.Fatalf("the probe's answer is not JSON: %v", err)
	}
	return charts
}

// overlapping is every pair of a chart's text boxes that share more than
// a sliver (0.5 px each way: boxes that touch do not count), and every box
// that sticks out of the chart, where the browser cuts it off.
func overlapping(c chartText) []string {
	var bad []string
	const sliver = 0.5
	for i, a := range c.Texts {
		if a.Box[0] < c.Box[0]-sliver || a.Box[1] < c.Box[1]-sliver || a.Box[2] > c.Box[2]+sliver || a.Box[3] > c.Box[3]+sliver {
			bad = append(bad, "\""+a.S+"\" sticks out of the chart")
		}
		for _, b := range c.Texts[i+1:] {
			dx := min(a.Box[2], b.Box[2]) - max(a.Box[0], b.Box[0])
			dy := min(a.Box[3], b.Box[3]) - max(a.Box[1], b.Box[1])
			if dx > sliver && dy > sliver {
				bad = append(bad, "\""+a.S+"\" overlaps \""+b.S+"\"")
			}
		}
	}
	return bad
}

// cutLadder is a run whose repeated 12-session step reaches far past the
// chart's top on TTFT and errors in both of its runs, as the default
// simulated run does: each run's whisker is cut with its value printed
// ("↑ 28.0" and "↑ 26.0", 11 px apart on one line), and so are the
// pooled centres of the errors.
func cutLadder() []sweep.StepResult {
	ok := pv{0, 0, 0.01, 0, 0}
	return []sweep.StepResult{
		judgedStep(0, 4, pv{1.2, 0.9, 1.6, 1, 2.5}, pv{30, 25, 35, 20, 40}, ok),
		judgedStep(1, 8, pv{2.5, 1.9, 3.2, 2.5, 5}, pv{20, 16, 24, 13.3, 20}, ok),
		judgedStep(2, 12, pv{9.8, 6.1, 28.0, 5, 10}, pv{7, 5, 9, 5, 10}, pv{0.09, 0.05, 0.168, 0, 0}),
		judgedStep(3, 8, pv{2.6, 2, 3.3, 2.5, 5}, pv{19, 15, 23, 13.3, 20}, ok),
		judgedStep(4, 12, pv{11.2, 7.3, 26.0, 10, 20}, pv{6.5, 4.8, 8.6, 5, 10}, pv{0.095, 0.06, 0.133, 0, 0}),
	}
}

func writeRun(t *testing.T, s Summary) *Dir {
	t.Helper()
	d, err := NewDir(t.TempDir(), s.Recipe.Name, fixedTime)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteJSON("summary.json", s); err != nil {
		t.Fatal(err)
	}
	if err := Render(d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestChartTextDoesNotOverlap: the off-chart values of a repeated step's
// two runs were printed on one line 11 px apart ("↑ 28.0" over "↑ 26.0").
// In every chart of the report and of the comparison, as Chromium lays
// them out at 1280 and at 700 px, no text box overlaps another or sticks
// out of its chart.
func TestChartTextDoesNotOverlap(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("chromium is not installed, so the charts' text cannot be checked: apt-get install -y chromium")
	}
	s := summaryOf(cutLadder(), 10)
	s.Recipe.Name = "cut"
	d := writeRun(t, s)
	// compared with a recipe whose name is longer than the bar charts'
	// margin for names
	_, cmpPage, err := Compare([]*Dir{d, synthRun(t, "a-recipe-with-a-rather-long-name-for-a-narrow-window", 4, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true)})
	if err != nil {
		t.Fatal(err)
	}
	cmp := filepath.Join(t.TempDir(), "compare.html")
	if err := os.WriteFile(cmp, cmpPage, 0o644); err != nil {
		t.Fatal(err)
	}
	// and a long ladder, its steps over time too short for their labels
	var long []sweep.StepResult
	for i := 0; i < 24; i++ {
		long = append(long, judgedStep(i, 100+10*i, pv{1 + 0.2*float64(i), 0.8 + 0.2*float64(i), 1.3 + 0.2*float64(i), 1, 2.5}, pv{30, 25, 35, 20, 40}, pv{0, 0, 0.01, 0, 0}))
	}
	ls := summaryOf(long, 0)
	ls.Recipe.Name = "long"
	longRun := writeRun(t, ls)
	for _, page := range []string{d.File("report.html"), cmp, longRun.File("report.html")} {
		for _, width := range []int{1280, 700} {
			if os.Getenv("HEADROOM_KEEP_SCREENSHOTS") != "" {
				screenshotW(t, page, width, 5000)
			}
			charts := layOutCharts(t, page, width)
			if len(charts) < 3 {
				t.Fatalf("%s at %d px: %d charts shown, want every chart of the page", filepath.Base(page), width, len(charts))
			}
			for _, c := range charts {
				if len(c.Texts) < 5 {
					t.Errorf("%s at %d px, %q: %d text elements laid out, want its ticks and labels", filepath.Base(page), width, c.Label, len(c.Texts))
				}
				if bad := overlapping(c); len(bad) > 0 {
					t.Errorf("%s at %d px, %q:\n  %s", filepath.Base(page), width, c.Label, strings.Join(bad, "\n  "))
				}
			}
		}
	}
}

var svgTextRe = regexp.MustCompile(`<text x="([0-9.-]+)" y="([0-9.-]+)" text-anchor="(\w+)" ([^>]*)>([^<]*)</text>`)

// TestCutValuesStandApart is the same check without a browser, on the
// widths the charts reckon with: in the TTFT and errors charts of a
// repeated step cut off in both runs, wide and narrow, no two labels'
// boxes overlap.
func TestCutValuesStandApart(t *testing.T) {
	s := summaryOf(cutLadder(), 10)
	for _, m := range stepMetrics(s) {
		for _, w := range []float64{chartW, halfW} {
			svg := stepChart(s, m, w)
			var boxes []box
			var texts []string
			for _, t := range svgTextRe.FindAllStringSubmatch(svg, -1) {
				x, _ := strconv.ParseFloat(t[1], 64)
				y, _ := strconv.ParseFloat(t[2], 64)
				size, bold := fontOf(t[4])
				boxes = append(boxes, textBox(x, y, t[3], size, bold, html.UnescapeString(t[5])))
				texts = append(texts, html.UnescapeString(t[5]))
			}
			if cuts := strings.Count(svg, ">↑ "); m.id != "interactivity" && cuts < 2 {
				t.Errorf("%s at %.0f: %d values printed as cut off the top, want both runs of the 12-session step", m.id, w, cuts)
			}
			for i := range boxes {
				for j := i + 1; j < len(boxes); j++ {
					if boxes[i].overlap(boxes[j]) > 0.25 {
						t.Errorf("%s at %.0f: %q overlaps %q", m.id, w, texts[i], texts[j])
					}
				}
			}
		}
	}
}

// TestChartTextReadableAt700: compare's bar charts were drawn only 1,160
// wide, so in a 700 px window their text shrank to under 9 px. Every chart
// the report and the comparison show at 700 px, the bar charts by name
// among them, renders its text at 10 px or more.
func TestChartTextReadableAt700(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("chromium is not installed, so the charts' text cannot be checked: apt-get install -y chromium")
	}
	d := synthRun(t, "today", 2, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true)
	if err := Render(d); err != nil {
		t.Fatal(err)
	}
	_, cmpPage, err := Compare([]*Dir{d, synthRun(t, "bigger", 4, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true)})
	if err != nil {
		t.Fatal(err)
	}
	cmp := filepath.Join(t.TempDir(), "compare.html")
	if err := os.WriteFile(cmp, cmpPage, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{cmp, d.File("report.html")} {
		shown := map[string]bool{}
		for _, c := range layOutCharts(t, page, 700) {
			shown[c.Label] = true
			smallest, what := math.Inf(1), ""
			for _, tx := range c.Texts {
				if tx.Font < smallest {
					smallest, what = tx.Font, tx.S
				}
			}
			t.Logf("%s at 700 px, %q: drawn at %.2f of its size, smallest text %.1f px (%q)", filepath.Base(page), c.Label, c.Scale, smallest, what)
			if smallest < 10 {
				t.Errorf("%s at 700 px, %q: %q is %.1f px high, want at least 10 px", filepath.Base(page), c.Label, what, smallest)
			}
		}
		if page == cmp {
			for _, want := range []string{"Concurrent sessions at the bar per node", "Concurrent sessions at the bar per $100 an hour"} {
				if !shown[want] {
					t.Errorf("compare.html at 700 px does not show %q", want)
				}
			}
		}
	}
}

// TestTickLabelsKeepApart: at 760 px a step run at 15 sessions and the
// next, not run, at 16 printed their ticks' labels 2 px apart ("1516").
// A label that would come within 6 px of one already drawn is left off,
// the step run keeping its own.
func TestTickLabelsKeepApart(t *testing.T) {
	p := newPlotW(halfW, 400, 0, 30, 0, 1)
	p.axes([]float64{0, 10, 15, 20, 25, 16}, []float64{0, 1}, tickLabel, tickLabel, "concurrent sessions", "y")
	svg := p.svg("ticks")
	var got []string
	var boxes []box
	for _, m := range svgTextRe.FindAllStringSubmatch(svg, -1) {
		y, _ := strconv.ParseFloat(m[2], 64)
		if y != p.h-p.b+24 {
			continue
		}
		x, _ := strconv.ParseFloat(m[1], 64)
		got = append(got, m[5])
		boxes = append(boxes, textBox(x, y, m[3], 15, false, m[5]))
	}
	if strings.Join(got, " ") != "0 10 15 20 25" {
		t.Errorf("x tick labels %q, want 0 10 15 20 25 (16, 2 px from 15, left off)", got)
	}
	for i := range boxes {
		for j := i + 1; j < len(boxes); j++ {
			if gap := max(boxes[j].x0-boxes[i].x1, boxes[i].x0-boxes[j].x1); gap < 6 {
				t.Errorf("tick labels %s and %s are %.1f px apart, want at least 6", got[i], got[j], gap)
			}
		}
	}
	if n := strings.Count(svg, fmt.Sprintf(`y1="%.1f" y2="%.1f"`, p.h-p.b, p.h-p.b+6)); n != 6 {
		t.Errorf("%d tick marks, want the 6 ticks kept, labelled or not", n)
	}
}

// TestStepLabelsKeepApart: a long ladder drawn over time at 760 px has
// steps too short for their sessions side by side ("100" is about 31 px,
// a step 27); every other label goes a row up, and none touches another.
func TestStepLabelsKeepApart(t *testing.T) {
	var r Run
	for i := 0; i < 24; i++ {
		start := float64(i) * 600
		r.Summary.Steps = append(r.Summary.Steps, Step{Sessions: 100 + 10*i, Verdict: "pass", StartS: start, MeasureStartS: start + 60, EndS: start + 600})
	}
	svg := queueChart(r, halfW)
	var boxes []box
	var got []string
	for _, m := range svgTextRe.FindAllStringSubmatch(svg, -1) {
		if n, err := strconv.Atoi(m[5]); err != nil || n < 100 || !strings.Contains(m[4], `font-weight="700"`) {
			continue
		}
		x, _ := strconv.ParseFloat(m[1], 64)
		y, _ := strconv.ParseFloat(m[2], 64)
		boxes = append(boxes, textBox(x, y, m[3], 14, true, m[5]))
		got = append(got, m[5])
	}
	if len(got) != 24 {
		t.Errorf("%d steps labelled with their sessions, want all 24: %q", len(got), got)
	}
	for i := range boxes {
		for j := i + 1; j < len(boxes); j++ {
			if b := (box{boxes[i].x0 - 2, boxes[i].y0, boxes[i].x1 + 2, boxes[i].y1}); b.overlap(boxes[j]) > 0 {
				t.Errorf("step labels %s and %s touch", got[i], got[j])
			}
		}
	}
}
