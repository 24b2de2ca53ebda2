package report

import (
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
	if n := strings.Count(h, "<svg "); n != 5 {
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
