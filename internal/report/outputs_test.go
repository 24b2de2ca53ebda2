package report

import (
	"encoding/csv"
	"encoding/xml"
	"errors"
	"html"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// TestMarkdownCarriesChartsAndWarnings: report.md had no charts, and left
// out warnings report.html showed (the run's error, a rebuilt summary, the
// capacity's note); it links each chart as an SVG file beside it, and
// lists every warning the page does.
func TestMarkdownCarriesChartsAndWarnings(t *testing.T) {
	d := synthRun(t, "r0", 2, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true)
	s, err := loadSummary(d)
	if err != nil {
		t.Fatal(err)
	}
	s.Error = "post-flight: the engine was not idle after 300 s"
	s.Capacity.Note = "nothing above 20 sessions was measured"
	if err := d.WriteJSON("summary.json", s); err != nil {
		t.Fatal(err)
	}
	if err := Render(d); err != nil {
		t.Fatal(err)
	}
	md, page := read(t, d.File("report.md")), read(t, d.File("report.html"))
	links := regexp.MustCompile(`!\[[^\]]+\]\(([^)]+\.svg)\)`).FindAllStringSubmatch(md, -1)
	if len(links) != 5 {
		t.Errorf("report.md links %d charts, want 5 (three parts, KV cache, queue)", len(links))
	}
	for _, l := range links {
		b, err := os.ReadFile(d.File(l[1]))
		if err != nil {
			t.Errorf("report.md links %s, which is not beside it: %v", l[1], err)
			continue
		}
		if !strings.HasPrefix(string(b), `<svg xmlns="http://www.w3.org/2000/svg"`) || !wellFormed(string(b)) {
			t.Errorf("%s is not a standalone SVG file", l[1])
		}
	}
	warnings := regexp.MustCompile(`(?s)<ul id="warnings"[^>]*>(.*?)</ul>`).FindStringSubmatch(page)
	if warnings == nil {
		t.Fatal("report.html has no list of warnings")
	}
	items := regexp.MustCompile(`<li>(.*?)</li>`).FindAllStringSubmatch(warnings[1], -1)
	if len(items) < 3 {
		t.Fatalf("report.html lists %d warnings, want the error and the run's", len(items))
	}
	for _, it := range items {
		if w := html.UnescapeString(it[1]); !strings.Contains(md, "- "+w+"\n") {
			t.Errorf("report.md lacks report.html's warning %q", w)
		}
	}
	for _, want := range []string{"The run ended in an error: post-flight", "Note: nothing above 20 sessions was measured"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
}

func wellFormed(s string) bool {
	dec := xml.NewDecoder(strings.NewReader(s))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// TestCSVExportsOfStepsAndRecords: steps.csv and records.csv, for a
// spreadsheet, beside the other renderings.
func TestCSVExportsOfStepsAndRecords(t *testing.T) {
	d := synthRun(t, "r0", 2, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true)
	j, err := d.Append("records.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	j.Write(load.Record{V: 1, Step: 0, Sessions: 4, Phase: load.PhaseMeasure, Lane: 1, Session: "light-0001", Tier: "light", Turn: 3, Agent: "sub-2",
		PlannedPromptTokens: 4000, ServedPromptTokens: 4001, MaxTokens: 300, OutputTokens: 250, Send: 61.5, FirstToken: 62.25, LastToken: 70, Status: 200})
	j.Write(load.Record{V: 1, Step: 0, Sessions: 4, Phase: load.PhaseMeasure, Lane: 2, Tier: "heavy", Send: 80, Status: 400, Error: load.ErrRefused, Detail: "context too long"})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Render(d); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, d.File("steps.csv"))
	if len(rows) != len(ladder)+1 {
		t.Fatalf("steps.csv has %d rows, want a header and %d steps", len(rows), len(ladder))
	}
	col := colIndex(rows[0])
	last := rows[len(rows)-1]
	if last[col["sessions"]] != "20" || last[col["verdict"]] != "fail" || last[col["errors_pct"]] != "3" || last[col["ttft_p90_s"]] != "9" {
		t.Errorf("the 20-session row %v, want fail with TTFT 9 s and errors 3%%", last)
	}
	recs := readCSV(t, d.File("records.csv"))
	if len(recs) != 3 {
		t.Fatalf("records.csv has %d rows, want a header and 2 records", len(recs))
	}
	rc := colIndex(recs[0])
	for _, c := range []string{"step", "lane", "session", "tier", "agent", "planned_prompt_tokens", "send_s", "first_token_s", "last_token_s", "status", "error", "detail", "ttft_s"} {
		if _, ok := rc[c]; !ok {
			t.Errorf("records.csv has no %s column", c)
		}
	}
	if r := recs[1]; r[rc["tier"]] != "light" || r[rc["agent"]] != "sub-2" || r[rc["ttft_s"]] != "0.75" || r[rc["served_prompt_tokens"]] != "4001" {
		t.Errorf("first record row %v", r)
	}
	if r := recs[2]; r[rc["error"]] != "refused" || r[rc["detail"]] != "context too long" || r[rc["ttft_s"]] != "" {
		t.Errorf("second record row %v, want the refusal with no TTFT", r)
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s is not CSV: %v", path, err)
	}
	return rows
}

func colIndex(head []string) map[string]int {
	m := map[string]int{}
	for i, h := range head {
		m[h] = i
	}
	return m
}

// TestErrorsInPercentAndLabelledRunFields: the parts tables printed the
// error part as "0.004" against "bar 0.02", and the run section's fields
// had no labels ("540 s of wall time at time scale 100").
func TestErrorsInPercentAndLabelledRunFields(t *testing.T) {
	d := synthRun(t, "r0", 2, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true)
	s, err := loadSummary(d)
	if err != nil {
		t.Fatal(err)
	}
	s.WallS, s.Versions = 36, map[string]string{"headroom": "v0.3.0"}
	r := Run{Summary: s}
	page, md := string(HTML(r)), string(Markdown(s))
	// 16 sessions: errors 0.004 (0.000-0.008) against the bar of 0.02
	if !strings.Contains(page, "<td>0.40%</td><td>0.00–0.80%</td><td>&lt; 2%</td>") {
		t.Error("report.html's parts table does not show the error part in percent")
	}
	if !strings.Contains(md, "| 16 | errors | pass | 0.40% | 0.00–0.80% | < 2% |") {
		t.Error("report.md's parts table does not show the error part in percent")
	}
	// the margin of a share is in percentage points
	if got := partMargin(verdict.Part{Name: verdict.PartErrors, Margin: 0.016}); got != "+1.60 points" {
		t.Errorf("the error part's margin reads %q, want +1.60 points", got)
	}
	for _, bad := range []string{"| 0.02 |", "<td>0.02</td>", "bar 0.02"} {
		if strings.Contains(page+md, bad) {
			t.Errorf("an error bar reads %q, not as a percentage", bad)
		}
	}
	for _, want := range []string{`<dl class="fields" id="run">`, "<dt>Wall time</dt><dd>36 s</dd>", "<dt>Time scale</dt>", "<dt>Run directory</dt>", "<dt>Version: headroom</dt><dd><code>v0.3.0</code></dd>"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html's run section lacks %q", want)
		}
	}
	for _, want := range []string{"- **Wall time:** 36 s", "- **Stopped:** a step missed the bar", "- **Version: headroom:** `v0.3.0`"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md's run section lacks %q", want)
		}
	}
}
