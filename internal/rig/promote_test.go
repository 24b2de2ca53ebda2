package rig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/recipe"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

var promoteBar = verdict.Bar{TTFTP90: 5.3, InteractivityP90: 10, ErrorRate: 0.02}

// summaryAt is a finished run of recipe that judged a target of 8
// sessions v, at usd per session-hour (lo-hi); lo = 0 leaves the interval out.
func summaryAt(recipe string, v verdict.Verdict, usd, lo, hi float64) report.Summary {
	s := report.Summary{Version: report.SummaryVersion, Recipe: report.Recipe{Name: recipe}, Bar: promoteBar,
		Target: &sweep.TargetVerdict{Sessions: 8, Verdict: v}}
	s.Cost.USDPerSessionHour = &usd
	if lo > 0 {
		s.Cost.USDPerSessionHourLo, s.Cost.USDPerSessionHourHi = &lo, &hi
	}
	return s
}

// writeRun saves s as runs/<recipe>/<stamp>/summary.json under root.
func writeRun(t *testing.T, root, stamp string, s report.Summary) string {
	t.Helper()
	dir := filepath.Join(root, s.Recipe.Name, stamp)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.RunDir = dir
	b, _ := json.Marshal(s)
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDecidePromotion(t *testing.T) {
	root := t.TempDir()
	// The parent's runs: an older one, and the latest, which counts.
	writeRun(t, root, "20260101T000000Z", summaryAt("parent", verdict.Pass, 1.00, 0.90, 1.10))
	writeRun(t, root, "20260102T000000Z", summaryAt("parent", verdict.Pass, 3.60, 3.40, 3.80))
	pricier := writeRun(t, root, "20260103T000000Z", summaryAt("other", verdict.Pass, 4.00, 3.80, 4.20))
	cheaper := writeRun(t, root, "20260103T000001Z", summaryAt("cheap", verdict.Pass, 2.50, 2.40, 2.60))
	close := writeRun(t, root, "20260103T000002Z", summaryAt("close", verdict.Pass, 3.20, 3.05, 3.40))
	failed := writeRun(t, root, "20260103T000003Z", summaryAt("failing", verdict.Fail, 1.00, 0.90, 1.10))
	atMost := summaryAt("ceiling", verdict.Pass, 4.00, 0, 0)
	atMost.Cost.AtMost = true
	ceiling := writeRun(t, root, "20260103T000004Z", atMost)
	otherBar := summaryAt("strict", verdict.Pass, 9.00, 8.50, 9.50)
	otherBar.Bar.TTFTP90 = 3
	strict := writeRun(t, root, "20260103T000005Z", otherBar)

	cfg := func(compare ...string) config.Run {
		return config.Run{Output: root,
			Recipe: config.Recipe{Name: "cand", Parent: "parent", Deploy: recipe.Deploy{Type: recipe.DeployKubernetes}},
			Deploy: config.Deploy{Promote: config.PromoteOnTarget, Compare: compare}}
	}
	cand := func(v verdict.Verdict) report.Summary {
		s := summaryAt("cand", v, 3.00, 2.80, 3.20)
		s.RunDir = filepath.Join(root, "cand", "20260104T000000Z")
		return s
	}
	cases := []struct {
		name    string
		cfg     config.Run
		sum     report.Summary
		promote bool
		reason  string // in the reason
	}{
		// Held the target, clearly cheaper than the parent's latest run.
		{"cheaper than the parent", cfg(), cand(verdict.Pass), true, "clearly cheaper than parent at $3.60"},
		// Never on too close, no data or fail.
		{"too close", cfg(), cand(verdict.TooClose), false, "reads too_close"},
		{"no data", cfg(), cand(verdict.NoData), false, "reads no_data"},
		{"fail", cfg(), cand(verdict.Fail), false, "reads fail"},
		// A run that ended in an error is not promoted.
		{"run error", cfg(), func() report.Summary { s := cand(verdict.Pass); s.Error = "interrupted: ...\nmore"; return s }(), false, "ended in an error (interrupted: ...)"},
		// deploy.promote never.
		{"policy never", func() config.Run { c := cfg(); c.Deploy.Promote = config.PromoteNever; return c }(), cand(verdict.Pass), false, "deploy.promote is never"},
		// The runs listed: cheaper than both.
		{"cheapest of the list", cfg(pricier, failed), cand(verdict.Pass), true, "other at $4.00"},
		// Another recipe holds the target for less.
		{"not the cheapest", cfg(pricier, cheaper), cand(verdict.Pass), false, "cheap (" + cheaper + ") holds the target at $2.50"},
		// Cheaper, but the intervals overlap: too close to call.
		{"intervals overlap", cfg(close), cand(verdict.Pass), false, "too close to call with close"},
		// The other's cost is only an upper bound.
		{"other all passed", cfg(ceiling), cand(verdict.Pass), false, "only an upper bound"},
		// A run on another bar cannot be compared.
		{"other bar", cfg(strict), cand(verdict.Pass), false, "judged on another bar"},
		// A run that failed the target does not compete.
		{"others failed", cfg(failed), cand(verdict.Pass), true, "no other run held the target"},
		// A parent with no run: nothing to say it is cheaper.
		{"parent never run", func() config.Run { c := cfg(); c.Recipe.Parent = "ghost"; return c }(), cand(verdict.Pass), false, "no run of the parent recipe ghost"},
		// Only the kubernetes deployer can keep a candidate.
		{"deploy none", func() config.Run { c := cfg(); c.Recipe.Deploy.Type = ""; return c }(), cand(verdict.Pass), false, "only recipe.deploy.type kubernetes"},
	}
	for _, c := range cases {
		p := DecidePromotion(c.cfg, c.sum)
		if p.Promote != c.promote || !strings.Contains(p.Reason, c.reason) {
			t.Errorf("%s: promote %v (%q), want %v and %q", c.name, p.Promote, p.Reason, c.promote, c.reason)
		}
		if p.RunID != "cand/20260104T000000Z" {
			t.Errorf("%s: run id %q", c.name, p.RunID)
		}
	}
	// The parent's latest run is the one compared.
	if p := DecidePromotion(cfg(), cand(verdict.Pass)); len(p.Compared) != 1 || filepath.Base(p.Compared[0]) != "20260102T000000Z" {
		t.Errorf("compared %v, want the parent's latest run", p.Compared)
	}
}
