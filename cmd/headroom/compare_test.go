package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// comparedRun writes a run directory holding only a summary, as compare
// reads it.
func comparedRun(t *testing.T, name string, nodes int, c sweep.Capacity) string {
	t.Helper()
	return comparedRunAt(t, name, nodes, c, 15)
}

// comparedRunAt is comparedRun judged against a target of its own.
func comparedRunAt(t *testing.T, name string, nodes int, c sweep.Capacity, target int) string {
	t.Helper()
	d, err := report.NewDir(t.TempDir(), name, time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	tv := c.Target(target)
	s := report.Summary{Version: report.SummaryVersion, Capacity: c, Target: &tv,
		Recipe: report.Recipe{Name: name, Engine: "vllm", Nodes: nodes, GPUsPerNode: 8, USDPerGPUHour: 1.8},
		Bar:    verdict.Bar{TTFTP90: 5.3, InteractivityP90: 10, ErrorRate: 0.02},
		Steps:  []report.Step{{Sessions: 20, Verdict: verdict.Pass}},
		Cost:   sweep.CostOf(nodes, 8, 1.8, c, sweep.Tokens{}, 0), RunDir: d.Path()}
	if err := d.WriteJSON("summary.json", s); err != nil {
		t.Fatal(err)
	}
	return d.Path()
}

// TestCompareJSONAndCSVFlags: compare printed Markdown only; --json and
// --csv print the comparison for a program, and --html still writes the
// page beside either.
func TestCompareJSONAndCSVFlags(t *testing.T) {
	dirs := []string{
		comparedRun(t, "six", 4, sweep.Capacity{Sessions: 19.2, Lo: 18.2, Hi: 20, LimitedBy: "ttft"}),
		comparedRun(t, "seven", 4, sweep.Capacity{Sessions: 20, Lo: 20, Hi: 20, LimitedBy: "not reached", AtLeast: true, HiOpen: true}),
	}
	page := filepath.Join(t.TempDir(), "compare.html")
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"compare", "--json", "--html", page}, dirs...), &out, &out); err != nil {
		t.Fatalf("compare --json: %v\n%s", err, out.String())
	}
	var doc struct {
		Best    string `json:"best"`
		Recipes []struct {
			Name     string          `json:"name"`
			Capacity *sweep.Capacity `json:"capacity"`
		} `json:"recipes"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("compare --json printed no JSON: %v\n%s", err, out.String())
	}
	if doc.Best != "seven" || len(doc.Recipes) != 2 || doc.Recipes[0].Capacity == nil || doc.Recipes[0].Capacity.Lo != 18.2 {
		t.Errorf("compare --json = %+v", doc)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), `id="chart-cmp-ttft"`) {
		t.Errorf("--html did not write the page with its overlays beside --json: %v", err)
	}

	out.Reset()
	if err := run(context.Background(), append([]string{"compare", "--csv"}, dirs...), &out, &out); err != nil {
		t.Fatalf("compare --csv: %v\n%s", err, out.String())
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil || len(rows) != 3 || rows[0][0] != "recipe" || rows[2][0] != "seven" {
		t.Errorf("compare --csv printed %v (%v), want a header and a row per recipe", rows, err)
	}

	out.Reset()
	err = run(context.Background(), append([]string{"compare", "--csv", "--json"}, dirs...), &out, &out)
	if err == nil || !strings.Contains(err.Error(), "give one of them") {
		t.Errorf("--csv with --json: %v, want an error saying to give one", err)
	}
}

// TestCompareStarsNoneAcrossTargets: compare starred the cheaper of two
// runs that each held its own target (10 and 15 sessions), as if they were
// ranked against one; it stars none and says why, in every format.
func TestCompareStarsNoneAcrossTargets(t *testing.T) {
	c := sweep.Capacity{Sessions: 19.2, Lo: 18.2, Hi: 20, LimitedBy: "ttft", Bracket: [2]int{16, 20}}
	dirs := []string{comparedRunAt(t, "small", 1, c, 10), comparedRunAt(t, "big", 4, c, 15)}
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"compare", "--json"}, dirs...), &out, &out); err != nil {
		t.Fatalf("compare --json: %v\n%s", err, out.String())
	}
	var doc struct {
		Best     string `json:"best"`
		Unranked string `json:"unranked"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("compare --json printed no JSON: %v\n%s", err, out.String())
	}
	if doc.Best != "" || !strings.Contains(doc.Unranked, "different targets") {
		t.Errorf("best %q, unranked %q: want none starred across targets 10 and 15", doc.Best, doc.Unranked)
	}
	out.Reset()
	if err := run(context.Background(), append([]string{"compare"}, dirs...), &out, &out); err != nil {
		t.Fatal(err)
	}
	if md := out.String(); strings.Contains(md, "★") || !strings.Contains(md, "No recipe is starred: the runs were judged against different targets") {
		t.Errorf("compare printed:\n%s", md)
	}
}

// TestCompareNoStepPassed: a run in which no step held the bar reads not
// established, with no price, in compare's table.
func TestCompareNoStepPassed(t *testing.T) {
	c := sweep.Capacity{LimitedBy: "ttft", Hi: 20, NotEstablished: true, Bracket: [2]int{0, 20}}
	held := sweep.Capacity{Sessions: 20, Lo: 20, Hi: 20, LimitedBy: "not reached", AtLeast: true, HiOpen: true, Bracket: [2]int{20, 0}}
	dirs := []string{comparedRun(t, "none", 1, c), comparedRun(t, "held", 4, held)}
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"compare"}, dirs...), &out, &out); err != nil {
		t.Fatal(err)
	}
	if md := out.String(); !strings.Contains(md, "| none | 8 | not established (none held; 20 missed) | TTFT | too close | n/a |") {
		t.Errorf("compare printed:\n%s", md)
	}
}
