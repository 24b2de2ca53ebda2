package report

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/headroom-bench/headroom/internal/sweep"
)

// ReportVersion is the version of report.json.
const ReportVersion = 1

// Render reads a run directory and writes its renderings next to the data:
// report.md with its charts as SVG files beside it, report.json (the
// summary, the gauges over time and the load by tier), junit.xml, the
// self-contained report.html, and steps.csv and records.csv for
// spreadsheets. It sends no load and can be run again at any time.
func Render(d *Dir) error {
	// records.csv is written from records.jsonl alone: beside the rest
	csv := make(chan error, 1)
	go func() { csv <- writeRecordsCSV(d) }()
	r, err := LoadRun(d)
	if err == nil {
		err = RenderRun(d, r)
	}
	if cerr := <-csv; cerr != nil && err == nil {
		err = fmt.Errorf("write records.csv: %w", cerr)
	}
	return err
}

// RenderRun writes the renderings of a run already in memory, e.g. the run
// that just finished; records.csv is written by Render, from the file.
func RenderRun(d *Dir, r Run) error {
	if r.Summary.RunDir == "" {
		r.Summary.RunDir = d.Path()
	}
	figs := runFigures(r)
	for _, f := range figs.all() {
		if err := d.WriteFile(f.file, []byte(f.svg)); err != nil {
			return fmt.Errorf("write %s: %w", f.file, err)
		}
	}
	if err := d.WriteFile("report.md", markdown(r, figs)); err != nil {
		return fmt.Errorf("write report.md: %w", err)
	}
	js, err := ReportJSON(r)
	if err != nil {
		return err
	}
	if err := d.WriteFile("report.json", js); err != nil {
		return fmt.Errorf("write report.json: %w", err)
	}
	ju, err := JUnit(r.Summary)
	if err != nil {
		return err
	}
	if err := d.WriteFile("junit.xml", ju); err != nil {
		return fmt.Errorf("write junit.xml: %w", err)
	}
	if err := d.WriteFile("steps.csv", StepsCSV(r.Summary)); err != nil {
		return fmt.Errorf("write steps.csv: %w", err)
	}
	if err := d.WriteFile("report.html", page(r, figs)); err != nil {
		return fmt.Errorf("write report.html: %w", err)
	}
	return nil
}

// ReportJSON renders report.json: the summary, the gauges over time and
// whether the summary was rebuilt from a killed run.
func ReportJSON(r Run) ([]byte, error) {
	doc := struct {
		Version int `json:"version"`
		Run
	}{ReportVersion, r}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode report.json: %w", err)
	}
	return append(b, '\n'), nil
}

// figure is one chart of a run: inline SVG in report.html, and an SVG file
// beside report.md that it links. narrow, when set, is the same chart drawn
// for a window of 760 px or less, where the wide one's text would shrink
// past reading.
type figure struct {
	id, file, title, caption, svg, narrow string
}

// figureSet is a run's charts, by the section that shows them.
type figureSet struct {
	bar    []figure // the bar's parts against sessions
	mixes  []figure // TTFT on each mix, side by side (the reference's figures 2 and 3)
	tiers  []figure // requests in flight per session, by tier
	engine []figure // KV cache and queue over time
}

func (f figureSet) all() []figure {
	return append(append(append(append([]figure(nil), f.bar...), f.mixes...), f.tiers...), f.engine...)
}

// halfW is the width of a chart drawn beside another, or for a narrow window.
const halfW = 760.0

func runFigures(r Run) figureSet {
	s := r.Summary
	var fs figureSet
	captions := map[string]string{
		"ttft":          "Lower is better. Green band: values within the bar. Each mark is a step's P90 from the server's histogram, shaped and coloured by this part's verdict; the whisker is its 95% interval, shaded where it is one histogram bucket wide; a repeated step's line goes through both runs pooled, its first run hollow beside it; a dashed ? is a step not measured; ▲ on the bar's line is where the line leaves it (for the part that limited capacity, at the capacity above); the blue dashed line and shade are the run's capacity and its interval.",
		"interactivity": "Higher is better: the tokens per second per user that 90% of streams beat. Green band: values within the bar.",
		"errors":        "Share of turns that failed, in percent, counting the turns a failed conversation never sent. Green band: below the bar.",
	}
	for _, m := range stepMetrics(s) {
		fs.bar = append(fs.bar, figure{id: "chart-" + m.id, file: "chart-" + m.id + ".svg", title: m.title + " against concurrent sessions",
			caption: captions[m.id], svg: stepChart(s, m, chartW), narrow: stepChart(s, m, halfW)})
	}
	if len(s.Mixes) > 0 {
		ttft := stepMetrics(s)[0]
		fs.mixes = append(fs.mixes, figure{id: "chart-mix-main", file: "chart-ttft-" + slug(s.mainMixLabel()) + ".svg",
			title: "P90 TTFT on " + s.mainMixLabel(), caption: mixCaption(s.mainMixLabel(), s.Capacity),
			svg: stepChart(s, ttft, halfW)})
		for _, mx := range s.Mixes {
			ms := mx.AsSummary(s)
			fs.mixes = append(fs.mixes, figure{id: "chart-mix-" + slug(mx.Label()), file: "chart-ttft-" + slug(mx.Label()) + ".svg",
				title: "P90 TTFT on " + mx.Label(), caption: mixCaption(mx.Label(), mx.Capacity), svg: stepChart(ms, ttft, halfW)})
		}
	}
	if len(tierNames(r.Tiers)) > 0 {
		fs.tiers = append(fs.tiers, figure{id: "chart-tiers", file: "chart-tiers.svg", title: "Requests in flight per session, by tier",
			caption: "From records.jsonl: each tier's requests in flight over the step's judged time, per session of the tier, subagents' included.",
			svg:     inFlightChart(r.Tiers, chartW), narrow: inFlightChart(r.Tiers, halfW)})
	}
	fs.engine = append(fs.engine,
		figure{id: "chart-kv", file: "chart-kv.svg", title: "KV cache use over time", svg: kvChart(r, chartW), narrow: kvChart(r, halfW),
			caption: "Share of the KV cache in use at each scrape. A cache that stays full means requests queue or get preempted: the sweep stops there."},
		figure{id: "chart-queue", file: "chart-queue.svg", title: "Requests running and waiting over time", svg: queueChart(r, chartW), narrow: queueChart(r, halfW),
			caption: "Requests the engine is running (solid) and holding in its queue (dashed). A waiting line that keeps growing within a step means the step is past what the engine can serve."},
	)
	return fs
}

func mixCaption(label string, c sweep.Capacity) string {
	return fmt.Sprintf("%s: capacity %s.", label, c.String())
}

// slug makes a label a file name: lower case, dashes for the rest.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// warningsOf is every warning a reader of the run must see, the same on
// report.md and report.html: a rebuilt summary, the run's error and the
// warnings of the run and its steps.
func warningsOf(r Run) []string {
	var out []string
	if r.Partial {
		out = append(out, "Partial report: summary.json is missing, so this report is rebuilt from steps.jsonl; cost per session-hour and post-flight are not known.")
	}
	if r.Summary.Error != "" {
		out = append(out, "The run ended in an error: "+r.Summary.Error)
	}
	return append(out, r.Summary.Warnings...)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
