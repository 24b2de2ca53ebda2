package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

func TestCompareLaysOutTheReferenceTable(t *testing.T) {
	light := []synthStep{{4, 1, 30, 0}, {8, 2, 20, 0}, {12, 3, 14, 0}, {16, 7, 9, 0}}
	heavy := []synthStep{{4, 6, 20, 0}}
	held := sweep.Capacity{Sessions: 20, Lo: 20, Hi: 20, LimitedBy: "not reached", AtLeast: true, HiOpen: true}
	dirs := []*Dir{
		synthRun(t, "today", 2, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true),
		synthRun(t, "today", 2, Mix{Light: 1}, light, ladderCapacity, 15, true),
		synthRun(t, "today", 2, Mix{Heavy: 1}, heavy, ladderCapacity, 15, true),
		synthRun(t, "bigger", 4, Mix{Heavy: 0.5, Light: 0.5}, ladder[:4], held, 15, true),
	}
	md, page, err := Compare(dirs)
	if err != nil {
		t.Fatal(err)
	}
	out := string(md)
	for _, want := range []string{
		"| Recipe | GPUs | Sessions at the bar (95% interval) | Limited by | Target 15 | $/session-hour (95% interval) | $/M tokens | Light-only | Heavy-only |",
		// 2 nodes x 8 GPUs; capacity 13.7 (12.6-15) touches 15, its centre to the
		// tenth its interval is printed to; light-only 12 passed and 16 failed;
		// heavy-only missed at 4
		"| today | 16 | ≈ 13.7 (12.6–15) | TTFT | too close | 2.10 | 0.50 | 12–16 | < 4 |",
		// every step passed: at least, cost at most, held the target, cheapest holder gets ★
		"| ★ bigger | 32 | ≥ 20 | not reached | ✓ | ≤ 2.88 | 0.50 |  |  |",
		"★ marks the recipe",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison lacks %q:\n%s", want, out)
		}
	}
	h := string(page)
	if strings.Contains(strings.ToLower(h), "<script") || externalRef.MatchString(h) || cssURL.MatchString(h) {
		t.Error("the comparison page is not self-contained")
	}
	for _, want := range []string{`<table id="comparison">`, `id="chart-per-node"`, `id="chart-per-dollar"`, `class="cmp-bar"`, "≈ too close", "✓ held"} {
		if !strings.Contains(h, want) {
			t.Errorf("comparison page lacks %q", want)
		}
	}
	// TTFT on the main mix and on light-only, interactivity, per node, per dollar
	if n := strings.Count(wideOnly(h), "<svg "); n != 5 {
		t.Errorf("comparison page has %d charts, want 5", n)
	}
	if _, _, err := Compare(nil); err == nil {
		t.Error("comparing nothing did not fail")
	}
}

func TestSingleKindCapacity(t *testing.T) {
	mk := func(vs ...verdict.Verdict) *Summary {
		s := &Summary{}
		for i, v := range vs {
			s.Steps = append(s.Steps, Step{Sessions: 5 * (i + 1), Verdict: v})
		}
		return s
	}
	cases := []struct {
		name string
		s    *Summary
		want string
	}{
		// no such run: the cell stays blank
		{"absent", nil, ""},
		// from the last pass to the first step that did not pass
		{"crossed", mk(verdict.Pass, verdict.Pass, verdict.Fail), "10–15"},
		// a too-close step ends the run of passes too
		{"too close", mk(verdict.Pass, verdict.TooClose), "5–10"},
		// the first step missed
		{"below first", mk(verdict.Fail), "< 5"},
		// every step passed: a floor, nothing extrapolated
		{"all passed", mk(verdict.Pass, verdict.Pass), "≥ 10"},
		// no steps ran
		{"empty", &Summary{}, "no data"},
	}
	for _, c := range cases {
		if got := singleKind(c.s); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestMixKind(t *testing.T) {
	cases := []struct {
		m    Mix
		want string
	}{
		{Mix{Heavy: 0.5, Light: 0.5}, MixMixed}, // both tiers
		{Mix{Light: 1}, MixLightOnly},           // no heavy sessions
		{Mix{Heavy: 1}, MixHeavyOnly},           // no light sessions
		{Mix{}, MixMixed},                       // unknown shares: treated as the main row
	}
	for _, c := range cases {
		if got := c.m.Kind(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.m, got, c.want)
		}
	}
}

// costed rewrites a synthetic run's summary with its capacity and the cost
// that follows from it, as rig prices it.
func costed(t *testing.T, d *Dir, c sweep.Capacity) {
	t.Helper()
	s, err := loadSummary(d)
	if err != nil {
		t.Fatal(err)
	}
	s.Capacity = c
	tv := c.Target(15)
	s.Target = &tv
	tokens := s.Cost.USDPerMillionTokens
	s.Cost = sweep.CostOf(s.Recipe.Nodes, s.Recipe.GPUsPerNode, s.Recipe.USDPerGPUHour, c, sweep.Tokens{}, 0)
	s.Cost.USDPerMillionTokens = tokens
	if err := d.WriteJSON("summary.json", s); err != nil {
		t.Fatal(err)
	}
}

// TestCompareTooCloseToCall: ★ went to the cheapest recipe that held the
// target even when the next one's $ per session-hour interval overlapped
// its own; it now says too close to call. The reference's own table (7 at
// ≤ 2.88, 6 from 2.88) only touches, and keeps its ★.
func TestCompareTooCloseToCall(t *testing.T) {
	run := func(name string, c sweep.Capacity) *Dir {
		d := synthRun(t, name, 4, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true)
		costed(t, d, c)
		return d
	}
	// 57.60 $/hour: 18.2-20 sessions is 2.88-3.16, 17-19.5 is 2.95-3.39
	six := sweep.Capacity{Sessions: 19.2, Lo: 18.2, Hi: 20, LimitedBy: "ttft"}
	md, page, err := Compare([]*Dir{run("six", six), run("three", sweep.Capacity{Sessions: 18, Lo: 17, Hi: 19.5, LimitedBy: "ttft"})})
	if err != nil {
		t.Fatal(err)
	}
	out := string(md)
	if strings.Contains(out, "★") {
		t.Errorf("a recipe is starred though the two holders' intervals overlap:\n%s", out)
	}
	for _, want := range []string{"| six | 32 | ≈ 19.2 (18.2–20) | TTFT | ✓ | 3.00 (2.88–3.16) |", "Too close to call: six ($3.00 (2.88–3.16) per session-hour) and three ($3.20 (2.95–3.39) per session-hour)"} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(string(page), `id="too-close"`) || strings.Contains(string(page), "background:#dafbe1") {
		t.Error("the page stars a winner, or does not say it is too close to call")
	}

	seven := sweep.Capacity{Sessions: 20, Lo: 20, Hi: 20, LimitedBy: "not reached", AtLeast: true, HiOpen: true}
	md, _, err = Compare([]*Dir{run("six", six), run("seven", seven)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| ★ seven | 32 | ≥ 20 | not reached | ✓ | ≤ 2.88 |") {
		t.Errorf("the reference's ★ (≤ 2.88 against 2.88-3.16) is lost:\n%s", md)
	}
}

// TestCompareRoundsLikeItsIntervals: the centre was rounded to a whole
// session and its interval to a tenth, so 13.46 (13.44-15) read
// "≈ 13 (13.4–15)", a centre outside the interval printed beside it.
func TestCompareRoundsLikeItsIntervals(t *testing.T) {
	d := synthRun(t, "r", 2, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true)
	costed(t, d, sweep.Capacity{Sessions: 13.46, Lo: 13.44, Hi: 15, LimitedBy: "ttft"})
	md, _, err := Compare([]*Dir{d})
	if err != nil {
		t.Fatal(err)
	}
	cell := regexp.MustCompile(`≈ ([0-9.]+) \(([0-9.]+)–([0-9.]+)\)`).FindStringSubmatch(string(md))
	if cell == nil {
		t.Fatalf("no capacity cell in:\n%s", md)
	}
	c, lo, hi := atof(cell[1]), atof(cell[2]), atof(cell[3])
	if c < lo || c > hi || cell[1] != "13.5" {
		t.Errorf("capacity printed %q: the centre %g is not within its printed interval %g–%g, or not to its tenth", cell[0], c, lo, hi)
	}
}

func atof(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}

// TestCompareOverlaysCurves: the page had only bar charts; it overlays
// every recipe's P90 TTFT and P90 interactivity curves (the reference's
// figures 2 and 4), each with its ▲, and the light-only runs' TTFT
// (figure 3).
func TestCompareOverlaysCurves(t *testing.T) {
	light := []synthStep{{4, 1, 30, 0}, {8, 2, 20, 0}, {12, 3, 14, 0}, {16, 7, 9, 0}}
	held := sweep.Capacity{Sessions: 12, Lo: 12, Hi: 12, LimitedBy: "not reached", AtLeast: true, HiOpen: true}
	dirs := []*Dir{
		synthRun(t, "today", 2, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true),
		synthRun(t, "today", 2, Mix{Light: 1}, light, ladderCapacity, 15, true),
		synthRun(t, "bigger", 4, Mix{Heavy: 0.5, Light: 0.5}, ladder[:3], held, 15, true),
	}
	_, page, err := Compare(dirs)
	if err != nil {
		t.Fatal(err)
	}
	h := string(page)
	for _, id := range []string{"chart-cmp-ttft", "chart-cmp-interactivity", "chart-cmp-ttft-light"} {
		m := regexp.MustCompile(`(?s)<figure id="` + id + `">.*?</figure>`).FindString(wideOnly(h))
		if m == "" {
			t.Errorf("the page has no %s overlay", id)
			continue
		}
		want := 2
		if id == "chart-cmp-ttft-light" {
			want = 1
		}
		if n := strings.Count(m, `<g class="recipe"`); n != want {
			t.Errorf("%s draws %d recipes, want %d", id, n, want)
		}
		if id == "chart-cmp-ttft" {
			// today crosses at its capacity, 13.7; bigger passed every step:
			// no ▲, and a dashed ? at 16, which it did not run
			if !strings.Contains(m, `data-recipe="today" data-sessions="13.7"`) || strings.Contains(m, `data-recipe="bigger" data-sessions`) || !strings.Contains(m, "16 sessions: not run") {
				t.Errorf("%s does not mark today's crossing at 13.7 and bigger's unrun 16", id)
			}
		}
	}
}

// TestCompareJSONAndCSV: compare printed Markdown only.
func TestCompareJSONAndCSV(t *testing.T) {
	held := sweep.Capacity{Sessions: 20, Lo: 20, Hi: 20, LimitedBy: "not reached", AtLeast: true, HiOpen: true}
	c, err := CompareRuns([]*Dir{
		synthRun(t, "today", 2, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true),
		synthRun(t, "bigger", 4, Mix{Heavy: 0.5, Light: 0.5}, ladder[:4], held, 15, true),
	})
	if err != nil {
		t.Fatal(err)
	}
	js, err := c.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version int              `json:"version"`
		Best    string           `json:"best"`
		Recipes []ComparedRecipe `json:"recipes"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatalf("--json does not decode: %v\n%s", err, js)
	}
	if doc.Version != 1 || doc.Best != "bigger" || len(doc.Recipes) != 2 || doc.Recipes[0].Capacity == nil || doc.Recipes[0].Capacity.Sessions != 13.7 ||
		doc.Recipes[0].CapacityText != "≈ 13.7 (12.6–15)" || doc.Recipes[1].GPUs != 32 || !doc.Recipes[1].AtMost {
		t.Errorf("--json = %+v", doc)
	}
	rows, err := csv.NewReader(bytes.NewReader(c.CSV())).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("--csv: %d rows (%v), want a header and 2 recipes", len(rows), err)
	}
	col := colIndex(rows[0])
	if r := rows[1]; r[col["recipe"]] != "today" || r[col["sessions"]] != "13.7" || r[col["sessions_lo"]] != "12.6" || r[col["target_verdict"]] != "too_close" || r[col["best"]] != "false" {
		t.Errorf("--csv today row %v", r)
	}
	if r := rows[2]; r[col["best"]] != "true" || r[col["usd_per_session_hour_at_most"]] != "true" {
		t.Errorf("--csv bigger row %v", r)
	}
}

// TestCompareUnstatedGPUs: a run with no GPUs stated and no price (a
// flags-only run without --gpus) beside a priced one that holds the target:
// its GPUs read "not stated" (empty in the CSV), its $ per session-hour "not
// priced", and it is never starred as the cheapest at $0.00.
func TestCompareUnstatedGPUs(t *testing.T) {
	held := sweep.Capacity{Sessions: 20, Lo: 20, Hi: 20, LimitedBy: "not reached", AtLeast: true, HiOpen: true}
	priced := synthRun(t, "priced", 4, Mix{Heavy: 0.5, Light: 0.5}, ladder[:4], held, 15, true)
	free := synthRun(t, "unstated", 0, Mix{Heavy: 0.5, Light: 0.5}, ladder[:4], held, 15, true)
	s, err := loadSummary(free)
	if err != nil {
		t.Fatal(err)
	}
	s.Recipe.GPUsPerNode, s.Recipe.USDPerGPUHour = 0, 0
	if err := free.WriteJSON("summary.json", s); err != nil {
		t.Fatal(err)
	}
	costed(t, free, held)
	md, _, err := Compare([]*Dir{free, priced})
	if err != nil {
		t.Fatal(err)
	}
	if out := string(md); !strings.Contains(out, "| unstated | not stated | ≥ 20 | not reached | ✓ | not priced |") || !strings.Contains(out, "| ★ priced | 32 |") || strings.Contains(out, "0.00") {
		t.Errorf("comparison with a run given no GPUs:\n%s", out)
	}
	c, err := CompareRuns([]*Dir{free, priced})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(c.CSV())).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("--csv: %d rows (%v)", len(rows), err)
	}
	if col := colIndex(rows[0]); rows[1][col["gpus"]] != "" || rows[1][col["nodes"]] != "" || rows[1][col["usd_per_session_hour"]] != "" {
		t.Errorf("--csv row of the run with no GPUs stated: %v", rows[1])
	}
}
