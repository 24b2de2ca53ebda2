package report

import (
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// rankedRun writes a run directory holding only a summary of the given
// steps, judged against bar with a target, as compare reads it.
func rankedRun(t *testing.T, name string, nodes int, bar verdict.Bar, target int, steps []sweep.StepResult) *Dir {
	t.Helper()
	d, err := NewDir(t.TempDir(), name, time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	s := summaryOf(steps, target)
	s.Bar, s.Recipe.Name, s.Recipe.Nodes, s.RunDir = bar, name, nodes, d.Path()
	s.Cost = sweep.CostOf(nodes, 8, 1.8, s.Capacity, sweep.Tokens{}, 0)
	if err := d.WriteJSON("summary.json", s); err != nil {
		t.Fatal(err)
	}
	return d
}

// held is a ladder that holds 12 sessions with confidence and fails at 16.
func held() []sweep.StepResult {
	fast, ok := pv{20, 18, 22, 20, 25}, pv{0, 0, 0.01, 0, 0}
	return []sweep.StepResult{
		judgedStep(0, 4, pv{1, 0.8, 1.2, 1, 2.5}, fast, ok),
		judgedStep(1, 8, pv{1.5, 1.2, 1.8, 1, 2.5}, fast, ok),
		judgedStep(2, 12, pv{2, 1.7, 2.3, 1, 2.5}, fast, ok),
		judgedStep(3, 16, pv{12, 10, 14, 10, 15}, fast, ok),
	}
}

// TestCompareRefusesToRankAcrossBarsAndTargets: compare starred the
// cheapest holder of its target even when the runs were judged against
// different bars or different targets, so that a recipe held to a looser
// bar (or a smaller target) could be starred over one held to a stricter
// one. It now stars none and says why; runs under one bar and target are
// still ranked.
func TestCompareRefusesToRankAcrossBarsAndTargets(t *testing.T) {
	loose := testBar
	loose.TTFTP90 = 10
	cases := []struct {
		name    string
		dirs    func() []*Dir
		best    string
		because string
	}{
		{"one bar, one target", func() []*Dir {
			return []*Dir{rankedRun(t, "small", 1, testBar, 8, held()), rankedRun(t, "big", 4, testBar, 8, held())}
		}, "small", ""},
		{"different bars", func() []*Dir {
			return []*Dir{rankedRun(t, "small", 1, loose, 8, held()), rankedRun(t, "big", 4, testBar, 8, held())}
		}, "", "different bars"},
		{"different targets", func() []*Dir {
			return []*Dir{rankedRun(t, "small", 1, testBar, 4, held()), rankedRun(t, "big", 4, testBar, 8, held())}
		}, "", "different targets"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmp, err := CompareRuns(c.dirs())
			if err != nil {
				t.Fatal(err)
			}
			md := string(cmp.Markdown())
			if cmp.Best != c.best || len(cmp.TooCloseToCall) > 0 {
				t.Errorf("best %q (too close %v), want %q:\n%s", cmp.Best, cmp.TooCloseToCall, c.best, md)
			}
			if c.because != "" && (!strings.Contains(cmp.Unranked, c.because) || !strings.Contains(md, "No recipe is starred: the runs were judged against "+c.because) || strings.Contains(md, "★")) {
				t.Errorf("unranked %q, want it to say %q, with no ★:\n%s", cmp.Unranked, c.because, md)
			}
		})
	}
}

// TestCompareNotEstablished: a run in which no step passed is listed as
// not established, with no price, and never starred.
func TestCompareNotEstablished(t *testing.T) {
	dirs := []*Dir{rankedRun(t, "none", 1, testBar, 4, noPassLadder()), rankedRun(t, "held", 4, testBar, 4, held())}
	cmp, err := CompareRuns(dirs)
	if err != nil {
		t.Fatal(err)
	}
	r := cmp.Recipes[0]
	if r.CapacityText != "not established (none held; 4 missed)" || r.SessionHourText != "n/a" || r.Best || r.USDPerSessionHour != nil {
		t.Errorf("the run where no step passed reads %q at %q (best %v)", r.CapacityText, r.SessionHourText, r.Best)
	}
	if cmp.Best != "held" {
		t.Errorf("best %q, want the run that held", cmp.Best)
	}
	if md := string(cmp.Markdown()); !strings.Contains(md, "| none | 8 | not established (none held; 4 missed) | TTFT |") {
		t.Errorf("markdown:\n%s", md)
	}
	if page := string(cmp.HTML()); !strings.Contains(page, "not established") {
		t.Errorf("the page does not say not established")
	}
	if csv := string(cmp.CSV()); !strings.Contains(csv, ",not_established\n") || !strings.Contains(csv, ",true\n") {
		t.Errorf("csv:\n%s", csv)
	}
}
