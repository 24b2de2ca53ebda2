package report

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// warnedSummary is a run of five steps whose warnings repeat one fact per
// step, as the default run's do: few turns for the error bar at 4 and 12
// sessions (steps 1, 3, 5), pooled repeats, short steps, and one warning of
// the run's own.
func warnedSummary() Summary {
	few := func(n int, hi string) stats.Summary {
		return stats.Summary{Center: 0, Lo: 0, Hi: 0.1, Warnings: []string{"few turns: 0 errors in " + strconv.Itoa(n) + " turns has a Wilson interval of 0.00-" + hi + "%, not below the bar of 2.00%: too close until more turns are judged"}}
	}
	step := func(sessions int, parts []verdict.Part, warns ...string) Step {
		return Step{Sessions: sessions, Parts: parts, Warnings: warns}
	}
	s := Summary{Recipe: Recipe{Name: "r", Nodes: 2, GPUsPerNode: 8, USDPerGPUHour: 1.8}, Bar: testBar}
	s.Steps = []Step{
		step(4, []verdict.Part{{Name: "errors", Value: few(154, "2.43")}}),
		step(8, nil),
		step(12, []verdict.Part{{Name: "errors", Value: few(19, "16.82")}}, "only 4 windows: the bootstrap intervals understate the uncertainty"),
		step(8, nil, "judged on this run and step 2's together (60 windows: 30 of step 2, 30 of this run)"),
		step(12, []verdict.Part{{Name: "errors", Value: few(25, "13.32")}}, "judged on this run and step 3's together (5 windows: 4 of step 3, 1 of this run)", "only 5 windows: the bootstrap intervals understate the uncertainty"),
	}
	s.Collect([]string{"the server reports no HTTP status counters: refusals are counted as the client sees them"})
	return s
}

func warningLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "warning: ") {
			out = append(out, l)
		}
	}
	return out
}

// TestTerminalGroupsWarningsByCause: the terminal shows each cause once with
// the steps and sessions it touches, in step order (4 sessions before 12,
// not as text), and the verbose text every line, step by step.
func TestTerminalGroupsWarningsByCause(t *testing.T) {
	s := warnedSummary()
	var b strings.Builder
	if err := WriteText(&b, s); err != nil {
		t.Fatal(err)
	}
	got := warningLines(b.String())
	want := []string{
		"warning: the server reports no HTTP status counters: refusals are counted as the client sees them",
		"warning: errors: few turns: steps 1, 3, 5 (4, 12 sessions)",
		"warning: only N windows: steps 3, 5 (12 sessions)",
		"warning: judged on this run and step N's together: steps 4, 5 (8, 12 sessions)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("terminal warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	b.Reset()
	if err := WriteTextAll(&b, s); err != nil {
		t.Fatal(err)
	}
	all := warningLines(b.String())
	if len(all) != 8 {
		t.Errorf("verbose: %d warning lines, want all 8:\n%s", len(all), strings.Join(all, "\n"))
	}
	if len(all) > 2 && (!strings.HasPrefix(all[1], "warning: step 1 (4 sessions): errors: few turns: 0 errors in 154 turns") ||
		!strings.HasPrefix(all[len(all)-1], "warning: step 5 (12 sessions): ")) {
		t.Errorf("verbose warnings not in step order:\n%s", strings.Join(all, "\n"))
	}
}

// TestTerminalCapsWarnings: past maxWarnings causes, one line says how
// many more there are and where they are.
func TestTerminalCapsWarnings(t *testing.T) {
	s := warnedSummary()
	for i := range 4 {
		s.Steps[1].Warnings = append(s.Steps[1].Warnings, "cause "+string(rune('a'+i))+": something")
	}
	s.Collect(nil)
	var b strings.Builder
	WriteText(&b, s)
	got := warningLines(b.String())
	if len(got) != maxWarnings+1 || !strings.Contains(got[maxWarnings], "more cause") || !strings.Contains(got[maxWarnings], "--verbose") {
		t.Errorf("want %d causes and a line for the rest:\n%s", maxWarnings, strings.Join(got, "\n"))
	}
}

// TestTextUnpriced: a recipe without a price says so, on the header and the
// cost line, instead of $0.00.
func TestTextUnpriced(t *testing.T) {
	s := warnedSummary()
	s.Recipe.USDPerGPUHour = 0
	var b strings.Builder
	WriteText(&b, s)
	if !strings.Contains(b.String(), "recipe r: 2 x 8 GPUs, not priced; bar:") || !strings.Contains(b.String(), "cost: not priced") || strings.Contains(b.String(), "$0.00") {
		t.Errorf("unpriced recipe:\n%s", b.String())
	}
}

// An unpriced recipe reads "not priced" in report.md and report.html too,
// never "$0.00 per GPU-hour".
func TestReportsUnpriced(t *testing.T) {
	s := warnedSummary()
	s.Recipe.USDPerGPUHour = 0
	for name, page := range map[string][]byte{"report.md": Markdown(s), "report.html": HTML(Run{Summary: s})} {
		if !strings.Contains(string(page), "not priced") || strings.Contains(string(page), "$0.00 per GPU-hour") {
			t.Errorf("%s of an unpriced recipe:\n%s", name, page)
		}
	}
}

// TestReportsUnstatedGPUs: a run given no GPUs and no price (a flags-only
// run against a real endpoint without --gpus) states no GPU count and no
// dollar figure in the terminal, report.md or report.html, however its
// capacity came out: "GPUs not stated" and "not priced".
func TestReportsUnstatedGPUs(t *testing.T) {
	s := warnedSummary()
	s.Recipe.Nodes, s.Recipe.GPUsPerNode, s.Recipe.USDPerGPUHour = 0, 0, 0
	s.Capacity = sweep.Capacity{Sessions: 10, Lo: 8, Hi: 12, LimitedBy: "ttft"}
	s.Cost = sweep.CostOf(0, 0, 0, s.Capacity, sweep.Tokens{Prompt: 1e6, Output: 1e5, Seconds: 600, PerHour: 6.6e6}, 8)
	var text strings.Builder
	WriteText(&text, s)
	count := regexp.MustCompile(`\d+ x \d+ GPUs|\d+ node\(s\)|\$0\.00|\$0\.000`)
	for name, page := range map[string]string{"terminal": text.String(), "report.md": string(Markdown(s)), "report.html": string(HTML(Run{Summary: s}))} {
		if c := count.FindString(page); c != "" || !strings.Contains(page, "GPUs not stated") || !strings.Contains(page, "not priced") {
			t.Errorf("%s of a run with no GPUs stated says %q, want \"GPUs not stated\" and \"not priced\":\n%s", name, c, page)
		}
	}
	if !strings.Contains(text.String(), "recipe r: GPUs not stated, not priced; bar:") {
		t.Errorf("terminal header:\n%s", text.String())
	}
}
