package report

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/notify"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// noPassLadder is a sweep in which no step passed: 4 sessions too close on
// TTFT, 8 failed.
func noPassLadder() []sweep.StepResult {
	fast, ok := pv{20, 18, 22, 20, 25}, pv{0, 0, 0.01, 0, 0}
	return []sweep.StepResult{
		judgedStep(0, 4, pv{5.0, 3.5, 6.5, 5, 7.5}, fast, ok),
		judgedStep(1, 8, pv{9, 8, 10, 7.5, 10}, fast, ok),
	}
}

// TestNoStepPassedHasNoHeadline: a run in which no step passed read
// "capacity: 4.3 sessions (95% interval 0-5.6)" and "$6.70 per
// session-hour" on every surface, as if measured. Now the terminal, the
// Markdown, the HTML, the JSON and the PR comment say not established, with
// the evidence, and the cost is n/a with an open-ended floor.
func TestNoStepPassedHasNoHeadline(t *testing.T) {
	s := summaryOf(noPassLadder(), 4)
	s.RunDir, s.StopReason = "runs/r/1", "step 2 (8 sessions) failed"
	if !s.Capacity.NotEstablished || s.Capacity.Sessions != 0 {
		t.Fatalf("capacity %+v, want not established", s.Capacity)
	}
	measured := []string{"sessions (95% interval", "0 sessions", "$6.70", "per session-hour (95%"}
	check := func(surface, out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s lacks %q:\n%s", surface, w, out)
			}
		}
		for _, m := range measured {
			if strings.Contains(out, m) {
				t.Errorf("%s reads %q as if capacity were measured:\n%s", surface, m, out)
			}
		}
	}
	var text bytes.Buffer
	if err := WriteText(&text, s); err != nil {
		t.Fatal(err)
	}
	check("the terminal", text.String(), "capacity: not established: no step held the bar", "first miss at 4 sessions",
		"cost: n/a per session-hour (no step held the bar: at least $", "with no upper end", "4 sessions too_close (ttft too_close 5.00 s")
	check("report.md", string(Markdown(s)), "**Capacity: not established", "**Cost: n/a per session-hour")
	page := string(HTML(Run{Summary: s}))
	check("report.html", page, ">not established<", ">n/a<", "with no upper end")
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version  int `json:"version"`
		Capacity struct {
			NotEstablished bool    `json:"not_established"`
			Bracket        [2]int  `json:"bracket"`
			Sessions       float64 `json:"sessions"`
		} `json:"capacity"`
		Cost struct {
			PerSessionHour *float64 `json:"usd_per_session_hour"`
			AtLeast        *float64 `json:"usd_per_session_hour_at_least"`
		} `json:"cost"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != 2 || !doc.Capacity.NotEstablished || doc.Capacity.Bracket != [2]int{0, 4} || doc.Capacity.Sessions != 0 || doc.Cost.PerSessionHour != nil || doc.Cost.AtLeast == nil {
		t.Errorf("summary.json %s", b)
	}
	check("the PR comment", prComment(t, s), "**r: capacity not established", "cost n/a per session-hour")
	check("the headline", Headline(s), "not established", "n/a")
	// the first step missed outright: below the first step, not established
	below := summaryOf(noPassLadder()[1:], 4)
	text.Reset()
	if err := WriteText(&text, below); err != nil {
		t.Fatal(err)
	}
	check("the terminal", text.String(), "capacity: below the first step (8 sessions): not established", "cost: n/a per session-hour")
}

// prComment is the pull-request comment a run's last message leaves, from
// a loopback GitHub.
func prComment(t *testing.T, s Summary) string {
	t.Helper()
	var mu sync.Mutex
	var body string
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet { // no comment from an earlier run
			io.WriteString(w, `[]`)
			return
		}
		var in struct{ Body string }
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &in)
		mu.Lock()
		body = in.Body
		mu.Unlock()
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		io.WriteString(w, `{"id": 5}`)
	}))
	defer gh.Close()
	g := &notify.GitHub{API: gh.URL, Repo: "acme/serving", PR: 1, Token: "t", Title: "headroom: " + s.Recipe.Name}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Deliver(ctx, notify.Message{Text: DoneText(s), Event: "done", Fields: map[string]any{"run_dir": s.RunDir}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return body
}

// TestCapacityLineShowsTheBracket: the capacity line, the Markdown and the
// HTML give the ladder's bracket (the last step held, the first missed)
// beside the fitted interval.
func TestCapacityLineShowsTheBracket(t *testing.T) {
	s := summaryOf(simLadder(), 8)
	if s.Capacity.Bracket != [2]int{8, 12} {
		t.Fatalf("bracket %v, want [8 12]", s.Capacity.Bracket)
	}
	var text bytes.Buffer
	if err := WriteText(&text, s); err != nil {
		t.Fatal(err)
	}
	for surface, out := range map[string]string{"the terminal": text.String(), "report.md": string(Markdown(s)), "report.html": string(HTML(Run{Summary: s}))} {
		if !strings.Contains(out, "ladder: 8 held, 12 missed") {
			t.Errorf("%s lacks the bracket:\n%s", surface, out)
		}
	}
}

// TestVersion1SummaryReadsAsVersion2: a summary written before version 2
// has no bracket, and one in which no step passed stated a capacity and a
// price; read now, it gets its bracket from its steps and is not
// established, with no price.
func TestVersion1SummaryReadsAsVersion2(t *testing.T) {
	for _, c := range []struct {
		name    string
		steps   []Step
		bracket [2]int
		est     bool
	}{
		{"no step passed", []Step{{Sessions: 4, Verdict: verdict.TooClose}, {Sessions: 8, Verdict: verdict.Fail}}, [2]int{0, 4}, false},
		{"held 8", []Step{{Sessions: 4, Verdict: verdict.Pass}, {Sessions: 8, Verdict: verdict.Pass}, {Sessions: 12, Verdict: verdict.Fail}}, [2]int{8, 12}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := NewDir(t.TempDir(), "old", time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
			if err != nil {
				t.Fatal(err)
			}
			price := 6.7
			v1 := Summary{Version: 1, Recipe: Recipe{Name: "old", Nodes: 2, GPUsPerNode: 8, USDPerGPUHour: 1.8}, Bar: testBar, Steps: c.steps,
				Capacity: sweep.Capacity{Sessions: 4.3, Lo: 0, Hi: 5.6, LimitedBy: "ttft"},
				Cost:     sweep.Cost{USDPerHour: 28.8, USDPerSessionHour: &price}}
			b, err := json.Marshal(v1)
			if err != nil {
				t.Fatal(err)
			}
			// exactly what version 1 wrote: no bracket, no not_established
			b = bytes.Replace(b, []byte(`,"bracket":[0,0]`), nil, 1)
			if bytes.Contains(b, []byte("bracket")) {
				t.Fatalf("the version 1 file still names the bracket: %s", b)
			}
			if err := os.WriteFile(d.File("summary.json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := LoadRun(d)
			if err != nil {
				t.Fatal(err)
			}
			got := r.Summary
			if got.Capacity.Bracket != c.bracket || got.Capacity.NotEstablished == c.est {
				t.Errorf("read %+v, want bracket %v, established %v", got.Capacity, c.bracket, c.est)
			}
			if !c.est && (got.Capacity.Sessions != 0 || got.Cost.USDPerSessionHour != nil) {
				t.Errorf("a version 1 run where no step passed reads capacity %g at %v per session-hour", got.Capacity.Sessions, got.Cost.USDPerSessionHour)
			}
			if c.est && (got.Capacity.Sessions != 4.3 || got.Cost.USDPerSessionHour == nil) {
				t.Errorf("a version 1 run that held a step lost its capacity or price: %+v", got)
			}
		})
	}
}

// TestRebuiltSummaryReadsCapacityAsTheRun: a run killed before writing
// summary.json is rebuilt from steps.jsonl. Its capacity came from every
// line there, the first runs of repeated steps included, while the run
// reads the latest judgement at each number of sessions: a repeat that
// held (pooled over both runs) after a first run that missed gave the
// rebuilt report a different capacity from the one the run said.
func TestRebuiltSummaryReadsCapacityAsTheRun(t *testing.T) {
	fast, ok := pv{20, 18, 22, 20, 25}, pv{0, 0, 0.01, 0, 0}
	steps := []sweep.StepResult{
		judgedStep(0, 4, pv{1.5, 1.2, 1.8, 1, 2.5}, fast, ok),
		judgedStep(1, 8, pv{6.5, 5.6, 7.4, 5, 7.5}, fast, ok), // the first run misses
		judgedStep(2, 8, pv{3.5, 3.0, 4.0, 2.5, 5}, fast, ok), // the repeat, pooled, holds
		judgedStep(3, 12, pv{9, 8, 10, 7.5, 10}, fast, ok),
	}
	steps[2].RepeatOf = 1
	d, err := NewDir(t.TempDir(), "killed", time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	j, err := d.Append("steps.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		j.Write(s)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := "version: 1\nrecipe:\n  name: killed\n  nodes: 2\n  gpus_per_node: 8\n  usd_per_gpu_hour: 1.8\nbar:\n  ttft_p90_s: 5.3\n  interactivity_p90_tps: 10\n  error_rate: 0.02\n"
	if err := d.WriteFile("config.yaml", []byte(cfg)); err != nil {
		t.Fatal(err)
	}
	r, err := LoadRun(d)
	if err != nil {
		t.Fatal(err)
	}
	want := sweep.CapacityOf(sweep.Points(steps))
	if !r.Partial || r.Summary.Capacity.String() != want.String() {
		t.Errorf("rebuilt capacity %q, the run's %q", r.Summary.Capacity, want)
	}
}

// A part whose run the kill switch cut short shows its interval open on
// the bad side, as verdict.Part.Bounds claims it: never an upper end on
// TTFT, or a lower end on interactivity, that the run did not measure.
func TestCutShortIntervalReadsOpen(t *testing.T) {
	ttft := verdict.Part{Name: verdict.PartTTFT, Verdict: verdict.TooClose, CutShort: true, Value: stats.Summary{Center: 7.68, Lo: 1.42, Hi: 10.95}}
	inter := verdict.Part{Name: verdict.PartInteractivity, Verdict: verdict.TooClose, CutShort: true, Value: stats.Summary{Center: 8, Lo: 4.92, Hi: 13.29}}
	closed := ttft
	closed.CutShort = false
	limited := closed
	limited.Limited = true
	interLimited := inter
	interLimited.CutShort, interLimited.Limited = false, true
	for _, c := range []struct {
		p    verdict.Part
		want string
	}{{ttft, "≥ 1.42 s (cut short)"}, {inter, "≤ 13.3 tokens/s (cut short)"}, {closed, "1.42–10.9 s"},
		{limited, "≥ 1.42 s (at the engine's limit)"}, {interLimited, "≤ 13.3 tokens/s (at the engine's limit)"}} {
		if got := partInterval(c.p); got != c.want {
			t.Errorf("%s (cut short %v): interval %q, want %q", c.p.Name, c.p.CutShort, got, c.want)
		}
	}
}
