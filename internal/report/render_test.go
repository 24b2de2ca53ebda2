package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// synthStep is one step of a synthetic run: its sessions and the centres
// of its three parts.
type synthStep struct {
	sessions    int
	ttft, inter float64
	errs        float64
}

// synthRun writes a run directory with known steps, gauges and summary, as
// `headroom run` would have left it. Steps run 600 modelled seconds each,
// 60 of them warm-up.
func synthRun(t *testing.T, recipe string, nodes int, mix Mix, steps []synthStep, capacity sweep.Capacity, target int, withSummary bool) *Dir {
	t.Helper()
	d, err := NewDir(t.TempDir(), recipe, time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	bar := verdict.Bar{TTFTP90: 5.3, InteractivityP90: 10, ErrorRate: 0.02}
	part := func(name string, v, b float64, ok bool, spread float64) verdict.Part {
		vd := verdict.Pass
		if !ok {
			vd = verdict.Fail
		}
		return verdict.Part{Name: name, Verdict: vd, Bar: b, Source: name + "_seconds",
			Value: stats.Summary{Center: v, Lo: v - spread, Hi: v + spread, Confidence: 0.95}}
	}
	var results []sweep.StepResult
	for i, s := range steps {
		start := float64(i) * 600
		parts := []verdict.Part{
			part("ttft", s.ttft, bar.TTFTP90, s.ttft <= bar.TTFTP90, 0.6),
			part("interactivity", s.inter, bar.InteractivityP90, s.inter >= bar.InteractivityP90, 1.5),
			part("errors", s.errs, bar.ErrorRate, s.errs < bar.ErrorRate, 0.004),
		}
		if parts[2].Value.Lo < 0 {
			parts[2].Value.Lo = 0
		}
		v := verdict.Pass
		for _, p := range parts {
			if p.Verdict != verdict.Pass {
				v = verdict.Fail
			}
		}
		var warn []string
		if i == 2 {
			warn = []string{"client and server P90 TTFT differ by 40%"}
		}
		results = append(results, sweep.StepResult{
			Index: i, Sessions: s.sessions, Start: start, MeasureStart: start + 60, End: start + 600,
			Judged: verdict.Step{Verdict: v, Parts: parts, Warnings: warn, SentFraction: 1},
			Load:   sweep.LoadSummary{Planned: 10 * s.sessions, Sent: 10 * s.sessions, InFlightPerSession: 1.1, ClientTTFTP90: s.ttft * 1.1},
			Tokens: sweep.Tokens{Prompt: 1e6, Cached: 9e5, Output: 1e4, Seconds: 540},
		})
	}
	sj, err := d.Append("steps.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		sj.Write(r)
	}
	if err := sj.Close(); err != nil {
		t.Fatal(err)
	}
	mj, err := d.Append("metrics.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for at := 0; at <= 600*len(steps); at += 15 {
		step := min(at/600, len(steps)-1)
		n := float64(steps[step].sessions)
		mj.Write(signal.Sample{At: time.Duration(at) * time.Second, Gauge: map[string]float64{
			signal.Running: n, signal.Waiting: float64(step), signal.KVCacheUsage: min(1, n/20),
		}})
	}
	if err := mj.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := "version: 1\nrecipe:\n  name: " + recipe + "\n  engine: vllm\n  nodes: " + itoa(nodes) +
		"\n  gpus_per_node: 8\n  usd_per_gpu_hour: 1.8\n  endpoint: http://127.0.0.1:1\n  model: m\nbar:\n  ttft_p90_s: 5.3\n  interactivity_p90_tps: 10\n  error_rate: 0.02\n" +
		"workload:\n  mix: {heavy: " + ftoa(mix.Heavy) + ", light: " + ftoa(mix.Light) + "}\nsweep:\n  target: " + itoa(target) + "\ntime_scale: 100\n"
	if err := d.WriteFile("config.yaml", []byte(cfg)); err != nil {
		t.Fatal(err)
	}
	if !withSummary {
		return d
	}
	usd := float64(nodes*8) * 1.8
	perSession, perTok := usd/capacity.Sessions, 0.5
	s := Summary{
		Version: SummaryVersion, Bar: bar, Capacity: capacity,
		Recipe:  Recipe{Name: recipe, Engine: "vllm", Nodes: nodes, GPUsPerNode: 8, USDPerGPUHour: 1.8, Model: "m", Endpoint: "http://127.0.0.1:1"},
		Cost:    sweep.Cost{USDPerHour: usd, USDPerSessionHour: &perSession, USDPerMillionTokens: &perTok, FromStep: steps[0].sessions},
		Started: "2026-11-29T09:00:00Z", StopReason: "a step missed the bar", RunDir: d.Path(), TimeScale: 100,
	}
	if capacity.AtLeast {
		s.Cost.AtMost = true
	}
	if target > 0 {
		tv := capacity.Target(target)
		s.Target = &tv
	}
	for _, r := range results {
		st := StepOf(r)
		st.StartS = 0 // as an older summary: LoadRun takes the start from steps.jsonl
		s.Steps = append(s.Steps, st)
	}
	s.Collect([]string{"post-flight: engine idle after 40 s"})
	s.Missing = []string{"itl_seconds"}
	if err := d.WriteJSON("summary.json", s); err != nil {
		t.Fatal(err)
	}
	return d
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
func ftoa(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

// ladder is the synthetic run most tests use: TTFT crosses the bar between
// 12 and 16 sessions; interactivity between 16 and 20.
var ladder = []synthStep{
	{4, 1.5, 30, 0}, {8, 2.5, 22, 0}, {12, 3.5, 15, 0.001}, {16, 6.5, 11, 0.004}, {20, 9, 8, 0.03},
}

var ladderCapacity = sweep.Capacity{Sessions: 13.7, Lo: 12.6, Hi: 15, LimitedBy: "ttft"}

var (
	externalRef = regexp.MustCompile(`(?i)(src|href|xlink:href)\s*=\s*["']?\s*(https?:)?//`)
	cssURL      = regexp.MustCompile(`(?i)url\(\s*["']?\s*(https?:)?//|@import`)
)

func TestRenderWritesSelfContainedReport(t *testing.T) {
	d := synthRun(t, "r0", 2, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true)
	if err := Render(d); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(d.File("report.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if strings.Contains(strings.ToLower(page), "<script") {
		t.Error("report.html has a <script>: it must read without JavaScript")
	}
	if m := externalRef.FindString(page); m != "" {
		t.Errorf("report.html loads from the network: %q", m)
	}
	if m := cssURL.FindString(page); m != "" {
		t.Errorf("report.html's CSS loads from the network: %q", m)
	}
	for _, want := range []string{
		`id="chart-ttft"`, `id="chart-interactivity"`, `id="chart-errors"`, `id="chart-kv"`, `id="chart-queue"`,
		`class="bar-band"`, `class="crossing"`, // the bar as a band and ▲ where it is crossed
		`<table id="verdicts">`, `✗ fail`, `✓ pass`, // verdicts in words, not colour alone
		"13.7 sessions", "95% interval 12.6–15", "interactivity", "≈ too close to call", "$2.10", "$0.500", // the headline
		"<code>itl_seconds</code>",                                                                                          // missing signals
		"client and server P90 TTFT differ by 40%",                                                                          // cross-check warnings
		"P90 TTFT (seconds)", "concurrent sessions", "modelled time since the run started (minutes)", "KV cache in use (%)", // axes with units
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	// every chart is well-formed SVG
	// each chart twice: for a wide window and for one of 760 px or less
	if n := len(svgRe.FindAllString(page, -1)); n != 10 {
		t.Errorf("report.html has %d SVG drawings, want 10", n)
	}
	svgs := svgRe.FindAllString(wideOnly(page), -1)
	if len(svgs) != 5 {
		t.Errorf("report.html has %d SVG charts, want 5", len(svgs))
	}
	for i, s := range svgs {
		dec := xml.NewDecoder(strings.NewReader(s))
		for {
			_, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Errorf("chart %d is not well-formed XML: %v", i, err)
				break
			}
		}
	}
	// the step boundaries are drawn from steps.jsonl starts (the summary had none)
	if !strings.Contains(svgs[3], ">20</text>") {
		t.Error("the KV chart does not label the 20-session step")
	}

	var rep struct {
		Version int          `json:"version"`
		Summary Summary      `json:"summary"`
		Series  []GaugePoint `json:"series"`
	}
	rb, _ := os.ReadFile(d.File("report.json"))
	if err := json.Unmarshal(rb, &rep); err != nil {
		t.Fatalf("report.json does not decode: %v", err)
	}
	if rep.Version != ReportVersion || len(rep.Summary.Steps) != len(ladder) || len(rep.Series) != 201 {
		t.Errorf("report.json: version %d, %d steps, %d gauge points; want %d, %d, 201", rep.Version, len(rep.Summary.Steps), len(rep.Series), ReportVersion, len(ladder))
	}
	if p := rep.Series[40]; p.KVCacheUsage == nil || *p.KVCacheUsage != 0.4 || p.Running == nil || *p.Running != 8 {
		t.Errorf("gauge point 40 = %+v, want 8 running and KV 0.4 (600 s, the second step)", p)
	}
	if rep.Summary.Steps[1].StartS != 600 {
		t.Errorf("step 2 starts at %g, want 600 from steps.jsonl", rep.Summary.Steps[1].StartS)
	}
	if md, _ := os.ReadFile(d.File("report.md")); !bytes.Contains(md, []byte("| 16 | fail |")) {
		t.Errorf("report.md lacks the failing step:\n%s", md)
	}
}

func TestJUnitDecodesBack(t *testing.T) {
	base := func() Summary {
		d := synthRun(t, "r0", 2, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true)
		s, err := loadSummary(d)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pass := sweep.TargetVerdict{Sessions: 10, Verdict: verdict.Pass}
	noData := sweep.TargetVerdict{Sessions: 30, Verdict: verdict.NoData}
	cases := []struct {
		name         string
		target       *sweep.TargetVerdict
		wantFailures int
		wantSkipped  int
		wantType     string // failure type of the target case, "" for none
	}{
		// 15 sits inside 12.6-15: too close fails the target case, and
		// only it: the misses at 16 and 20 are above the capacity
		{"too close target", &sweep.TargetVerdict{Sessions: 15, Verdict: verdict.TooClose}, 1, 0, "too_close"},
		// a held target is a passing case, and the run has no failures
		{"held target", &pass, 0, 0, ""},
		// a target beyond the ladder reads no data
		{"no data target", &noData, 1, 0, "no_data"},
		// without a target the case is skipped, not passed
		{"no target", nil, 0, 1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := base()
			s.Target = c.target
			su := junitSuite(t, s)
			// a case per part of each step (5 steps x 3 parts) and the target
			if su.Tests != 3*len(ladder)+1 || len(su.Cases) != su.Tests {
				t.Errorf("tests=%d cases=%d, want %d (a case per part of each step, and the target)", su.Tests, len(su.Cases), 3*len(ladder)+1)
			}
			if su.Failures != c.wantFailures || su.Skipped != c.wantSkipped {
				t.Errorf("failures %d skipped %d, want %d and %d", su.Failures, su.Skipped, c.wantFailures, c.wantSkipped)
			}
			ttft16 := su.Cases[9] // 16 sessions, TTFT over the bar: above the capacity, as expected
			if ttft16.Name != "16 sessions, run 1: ttft within the bar" || ttft16.Failure != nil || !strings.HasPrefix(ttft16.SystemOut, "expected: 16 sessions is above the capacity") {
				t.Errorf("16-session TTFT case = %+v, want a pass that says the miss was expected", ttft16)
			}
			// 540 judged seconds at time scale 100: 5.4 wall seconds
			if su.Cases[0].Failure != nil || su.Cases[0].Time != 5.4 {
				t.Errorf("4-session case = %+v, want a pass of 5.4 wall seconds (540 judged modelled seconds at scale 100)", su.Cases[0])
			}
			tc := su.Cases[len(su.Cases)-1]
			got := ""
			if tc.Failure != nil {
				got = tc.Failure.Type
			}
			if got != c.wantType {
				t.Errorf("target case failure type %q, want %q", got, c.wantType)
			}
		})
	}
}

func junitSuite(t *testing.T, s Summary) JUnitSuite {
	t.Helper()
	b, err := JUnit(s)
	if err != nil {
		t.Fatal(err)
	}
	var doc JUnitSuites
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("junit.xml does not decode: %v\n%s", err, b)
	}
	if len(doc.Suites) != 1 || doc.Failures != doc.Suites[0].Failures || doc.Tests != doc.Suites[0].Tests {
		t.Fatalf("%d suites, totals %d/%d: want 1 suite whose totals are the document's", len(doc.Suites), doc.Tests, doc.Failures)
	}
	return doc.Suites[0]
}

// TestJUnitHeldRunHasNoFailures: junit.xml failed a run whose target held,
// for the steps above its capacity that missed (where a sweep must end),
// named a repeated step's two runs alike, and printed errors as "bar 0.02".
func TestJUnitHeldRunHasNoFailures(t *testing.T) {
	s := summaryOf(simLadder(), 8)
	if s.Target.Verdict != verdict.Pass {
		t.Fatalf("target %+v, want held", s.Target)
	}
	su := junitSuite(t, s)
	if su.Failures != 0 {
		for _, c := range su.Cases {
			if c.Failure != nil {
				t.Errorf("failure in a held run: %s: %s", c.Name, c.Failure.Message)
			}
		}
	}
	names := map[string]bool{}
	for _, c := range su.Cases {
		key := c.ClassName + "/" + c.Name
		if names[key] {
			t.Errorf("two cases named %q", key)
		}
		names[key] = true
	}
	if !names["headroom.r.steps.8_sessions/8 sessions, run 2 (judged on all 2 runs pooled): errors within the bar"] {
		t.Errorf("no case for the repeat's errors part: %v", names)
	}
	b, _ := JUnit(s)
	if out := string(b); strings.Contains(out, "bar 0.02") || !strings.Contains(out, "bar &lt; 2%") || !strings.Contains(out, `name="bar.errors_below_pct" value="2"`) {
		t.Error("junit.xml does not show the error bar as a percentage")
	}

	// a rig error is the run's own error, not a failure of the recipe
	s.Error = "sweep: warm-up too short"
	su = junitSuite(t, s)
	if last := su.Cases[len(su.Cases)-1]; su.Failures != 0 || su.Errors != 1 || last.Error == nil || last.Error.Message != s.Error {
		t.Errorf("a held run that ended in a rig error: failures %d, errors %d, last case %+v", su.Failures, su.Errors, last)
	}
	s.Error = ""

	// a miss at or below the capacity fails when the target did not hold
	s.Capacity.Sessions, s.Capacity.Hi = 13, 13
	fail := sweep.TargetVerdict{Sessions: 14, Verdict: verdict.Fail}
	s.Target = &fail
	su = junitSuite(t, s)
	failed := map[string]bool{}
	for _, c := range su.Cases {
		if c.Failure != nil {
			failed[c.Name] = true
		}
	}
	if !failed["12 sessions, run 1: ttft within the bar"] || !failed["target of 14 sessions holds the bar"] || len(failed) != 5 {
		t.Errorf("failures %v, want the two parts that missed at each run of 12 sessions (below a capacity of 13) and the target", failed)
	}
}

func TestLoadRunRebuildsAKilledRun(t *testing.T) {
	d := synthRun(t, "r0", 2, Mix{Heavy: 0.5, Light: 0.5}, ladder[:4], ladderCapacity, 15, false)
	// a torn last line, as a kill mid-write leaves it
	f, err := os.OpenFile(d.File("steps.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"index":4,"sess`)
	f.Close()
	r, err := LoadRun(d)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Partial || len(r.Summary.Steps) != 4 || r.Summary.Recipe.Name != "r0" || r.Summary.Bar.TTFTP90 != 5.3 {
		t.Fatalf("rebuilt run: partial=%v steps=%d recipe=%q bar=%+v", r.Partial, len(r.Summary.Steps), r.Summary.Recipe.Name, r.Summary.Bar)
	}
	if c := r.Summary.Capacity; c.LimitedBy != "ttft" || c.Sessions <= 12 || c.Sessions >= 16 {
		t.Errorf("rebuilt capacity %+v, want a TTFT crossing between 12 and 16", c)
	}
	if r.Summary.Target == nil || r.Summary.Mix == nil || r.Summary.Mix.Kind() != MixMixed {
		t.Errorf("target %v and mix %v were not taken from config.yaml", r.Summary.Target, r.Summary.Mix)
	}
	if err := RenderRun(d, r); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(d.File("report.html")); !bytes.Contains(b, []byte("Partial report")) {
		t.Error("the page of a rebuilt run does not say it is partial")
	}
	if _, err := LoadRun(mustOpen(t, t.TempDir())); err == nil {
		t.Error("an empty directory loaded as a run")
	}
}

func mustOpen(t *testing.T, p string) *Dir {
	t.Helper()
	d, err := OpenDir(p)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCrossingAndTicks(t *testing.T) {
	steps := func(vals ...float64) []Step {
		var out []Step
		for i, v := range vals {
			out = append(out, Step{Sessions: 4 * (i + 1), TTFTP90: stats.Summary{Center: v}})
		}
		return out
	}
	m := stepMetrics(Summary{Bar: verdict.Bar{TTFTP90: 5}})[0]
	cases := []struct {
		name  string
		steps []Step
		at    float64
		ok    bool
	}{
		// 3 at 8 sessions, 7 at 12: the bar of 5 is crossed half way
		{"interpolated", steps(1, 3, 7), 10, true},
		// over the bar from the first step: crosses there
		{"first step", steps(6, 7), 4, true},
		// never over the bar: no ▲
		{"never", steps(1, 2, 3), 0, false},
	}
	for _, c := range cases {
		at, ok := crossing(Summary{Bar: verdict.Bar{TTFTP90: 5}}, c.steps, m)
		if ok != c.ok || at != c.at {
			t.Errorf("%s: crossing = %g, %v; want %g, %v", c.name, at, ok, c.at, c.ok)
		}
	}
	if got := niceTicks(0, 10, 5); len(got) != 6 || got[5] != 10 {
		t.Errorf("niceTicks(0, 10, 5) = %v", got)
	}
	if got := niceCeil(13.2, 5); got != 15 {
		t.Errorf("niceCeil(13.2, 5) = %g, want 15 (steps of 5)", got)
	}
}

func TestThinKeepsSpikes(t *testing.T) {
	var series []GaugePoint
	for i := range 10000 {
		v := 1.0
		if i == 5003 {
			v = 50 // one scrape's spike
		}
		series = append(series, GaugePoint{AtS: float64(i), Running: &v})
	}
	l := gaugeLine{value: func(g GaugePoint) *float64 { return g.Running }}
	pts := thin(series, l, 1000)
	if len(pts) > 2000 {
		t.Errorf("thin kept %d points for 1000 columns", len(pts))
	}
	spike := false
	for _, p := range pts {
		spike = spike || p.v == 50
	}
	if !spike {
		t.Error("thinning lost the spike")
	}
}
