package report

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

func sample() Summary {
	mk := func(n int, v verdict.Verdict, ttft, inter float64) Step {
		return Step{
			Sessions: n, Verdict: v,
			TTFTP90:          stats.Summary{Center: ttft, Lo: ttft - 1, Hi: ttft + 1},
			InteractivityP90: stats.Summary{Center: inter, Lo: inter - 2, Hi: inter + 2},
			ErrorRate:        stats.Summary{Center: 0.01, Lo: 0, Hi: 0.015},
			Parts:            []verdict.Part{{Name: "ttft", Verdict: v, Value: stats.Summary{Center: ttft, Lo: ttft - 1, Hi: ttft + 1}, Bar: 5.3}},
			Load:             sweep.LoadSummary{Planned: 40, Sent: 40, InFlightPerSession: 0.9},
			Tokens:           sweep.Tokens{Prompt: 1e6, Cached: 9e5},
		}
	}
	per := 2.77
	return Summary{
		Version: SummaryVersion, Recipe: Recipe{Name: "r0", Engine: "vllm", Nodes: 2, GPUsPerNode: 8, USDPerGPUHour: 1.8},
		Bar:      verdict.Bar{TTFTP90: 5.3, InteractivityP90: 10, ErrorRate: 0.02},
		Capacity: sweep.Capacity{Sessions: 10.4, Lo: 10, Hi: 12, LimitedBy: "interactivity"},
		Cost:     sweep.Cost{USDPerHour: 28.8, USDPerSessionHour: &per},
		Steps:    []Step{mk(8, verdict.Pass, 2, 14), mk(12, verdict.Fail, 7, 7)},
		Missing:  []string{"itl_seconds"},
		RunDir:   "runs/r0/x",
	}
}

func TestWriteTextHasTheKeyLines(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, sample()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"capacity: 10.4 sessions (95% interval 10-12), limited by interactivity",
		"cost: $2.77 per session-hour",
		"signals the bar wanted and did not get: itl_seconds",
		"90%", // cache hit of the steps
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	// the capacity line comes after the step table, cost right after it
	if strings.Index(out, "capacity:") > strings.Index(out, "cost:") {
		t.Errorf("cost printed before capacity:\n%s", out)
	}
}

func TestMarkdownHasStepTableAndSections(t *testing.T) {
	md := string(Markdown(sample()))
	for _, want := range []string{"| sessions | verdict |", "| 12 | fail |", "## Missing signals", "- itl_seconds", "## Client-side cross-checks"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
}

func TestSummaryJSONCarriesMissingValues(t *testing.T) {
	s := sample()
	s.Steps[0].TTFTP90 = stats.Summary{Center: math.NaN(), Lo: math.NaN(), Hi: math.Inf(1)}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("a summary with no-data values must still encode: %v", err)
	}
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(back.Steps[0].TTFTP90.Center) || !math.IsInf(back.Steps[0].TTFTP90.Hi, 1) {
		t.Errorf("no-data values did not survive JSON: %+v", back.Steps[0].TTFTP90)
	}
}

func TestDirWritesAtomicallyAndAppends(t *testing.T) {
	root := t.TempDir()
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	d1, err := NewDir(root, "r0", now)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := NewDir(root, "r0", now) // same second: a second directory, not the same one
	if err != nil || d1.Path() == d2.Path() {
		t.Fatalf("two runs in one second share %s (%v)", d1.Path(), err)
	}
	if err := d1.WriteJSON("summary.json", map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(d1.Path())
	if len(entries) != 1 || entries[0].Name() != "summary.json" {
		t.Errorf("run directory holds %v, want only summary.json (no temp files)", entries)
	}
	j, err := d1.Append("records.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	j.Write(map[string]int{"n": 1})
	j.Write(map[string]int{"n": 2})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(d1.Path(), "records.jsonl"))
	if got := strings.Count(string(b), "\n"); got != 2 {
		t.Errorf("records.jsonl has %d lines, want 2:\n%s", got, b)
	}
	if _, err := NewDir(filepath.Join(d1.File("summary.json"), "x"), "r", now); err == nil {
		t.Error("a run directory under a file was made")
	}
}

// TestJSONLSkipsWhatCannotBeEncoded: one NaN used to make the encoder fail
// once and every later line vanish silently.
func TestJSONLSkipsWhatCannotBeEncoded(t *testing.T) {
	d, err := NewDir(t.TempDir(), "r", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	j, err := d.Append("metrics.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	j.Write(map[string]float64{"ok": 1})
	j.Write(map[string]float64{"bad": math.NaN()})
	j.Write(map[string]float64{"ok": 2})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(d.File("metrics.jsonl"))
	if got := string(b); got != "{\"ok\":1}\n{\"ok\":2}\n" {
		t.Errorf("file holds %q: the good lines around a NaN must survive", got)
	}
	if w := j.Skipped(); !strings.Contains(w, "1 values could not be written") || !strings.Contains(w, "NaN") {
		t.Errorf("skipped value not reported: %q", w)
	}
}

// TestPartWarningsReachEveryRendering: a part's warning (few turns behind a
// passing error interval, a client TTFT far from the server's) used to live
// in summary.json only; it bears on the verdict, so the terminal, report.md,
// report.html and junit.xml show it too.
func TestPartWarningsReachEveryRendering(t *testing.T) {
	const warn = "client P90 TTFT 4.8 s is 2.3 times the server P90 of 2.05 s"
	st := Step{Sessions: 4, Verdict: verdict.Pass, Parts: []verdict.Part{
		{Name: "ttft", Verdict: verdict.Pass, Value: stats.Summary{Center: 2, Lo: 1, Hi: 3, Warnings: []string{warn}}},
	}}
	s := Summary{Version: SummaryVersion, Steps: []Step{st}}
	s.Collect(nil)
	var text bytes.Buffer
	if err := WriteText(&text, s); err != nil {
		t.Fatal(err)
	}
	junit, err := JUnit(s)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"terminal": text.String(), "report.md": string(Markdown(s)), "report.html": string(HTML(Run{Summary: s})), "junit.xml": string(junit)} {
		if !strings.Contains(out, "ttft: "+warn) {
			t.Errorf("%s does not show the part's warning", name)
		}
	}
}
