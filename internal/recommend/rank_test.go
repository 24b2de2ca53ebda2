package recommend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sweep"
)

// outcome is a simulated candidate with capacity c (one judged step) on
// gpus GPUs at $1 per GPU-hour, judged against target.
func outcome(index int, gpus int, c sweep.Capacity, target int) Outcome {
	var cfg config.Run
	cfg.Sweep.Target = target
	sum := report.Summary{Capacity: c, Steps: []report.Step{{Sessions: target, EndS: 1800}}}
	sum.Cost = sweep.CostOf(1, gpus, 1, c, sweep.Tokens{}, 0)
	tv := c.Target(target)
	sum.Target = &tv
	return Outcome{Candidate: Candidate{Index: index, Label: string(rune('A' + index - 1)), GPUs: gpus, USDPerHour: float64(gpus), Config: cfg}, Summary: sum}
}

func TestRank(t *testing.T) {
	const target = 10
	outs := []Outcome{
		// A: $2.00 (1.90-2.11) per session-hour: the cheapest
		outcome(1, 40, sweep.Capacity{Sessions: 20, Lo: 19, Hi: 21, LimitedBy: "ttft"}, target),
		// B: $2.05 (2.00-2.22): overlaps A
		outcome(2, 41, sweep.Capacity{Sessions: 20, Lo: 18.5, Hi: 20.5, LimitedBy: "ttft"}, target),
		// C: $3.00 (2.90-3.10): clear of its neighbour
		outcome(3, 60, sweep.Capacity{Sessions: 20, Lo: 19.35, Hi: 20.7, LimitedBy: "ttft"}, target),
		// D: the interval straddles the target
		outcome(4, 16, sweep.Capacity{Sessions: 11, Lo: 8, Hi: 12, LimitedBy: "ttft"}, target),
		// E: the interval lies below the target
		outcome(5, 16, sweep.Capacity{Sessions: 6, Lo: 5, Hi: 7, LimitedBy: "interactivity"}, target),
		// F: every step held up to 12: capacity at least 12, $ at most 2.5
		outcome(6, 30, sweep.Capacity{Sessions: 12, Lo: 12, Hi: 12, LimitedBy: "not reached", AtLeast: true, HiOpen: true}, target),
		// G: skipped
		{Candidate: Candidate{Index: 7, Label: "G", Skip: "recipe.copies: bad"}},
	}
	failed := outcome(8, 16, sweep.Capacity{Sessions: 20, Lo: 19, Hi: 21}, target)
	failed.Err = errors.New("sweep: warm-up too short")
	outs = append(outs, failed)

	res := Rank(Space{File: "s.yaml"}, outs)
	var order []string
	for _, c := range res.Candidates {
		order = append(order, c.Label)
	}
	// ranked by $ per session-hour (F's upper bound, 2.5, sorts between
	// B and C), then the rest by status, each in the space's order
	if want := []string{"A", "B", "F", "C", "D", "E", "H", "G"}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	got := map[string]Ranked{}
	for _, c := range res.Candidates {
		got[c.Label] = c
	}
	cases := []struct {
		label, status string
		rank          int
		close         []int
	}{
		{"A", Holds, 1, []int{2}},
		{"B", Holds, 2, []int{1, 3}}, // F's interval reaches down to 0
		{"F", Holds, 3, []int{2}},
		{"C", Holds, 4, nil}, // 2.90-3.10 against F's 0-2.50
		{"D", NeedsWindow, 0, nil},
		{"E", DoesNotHold, 0, nil},
		{"H", Failed, 0, nil},
		{"G", Skipped, 0, nil},
	}
	for _, c := range cases {
		r := got[c.label]
		if r.Status != c.status || r.Rank != c.rank || !slices.Equal(r.TooCloseWith, c.close) {
			t.Errorf("%s: %s #%d too close with %v; want %s #%d with %v (cost %+v)", c.label, r.Status, r.Rank, r.TooCloseWith, c.status, c.rank, c.close, r.USDPerSessionHour)
		}
	}
	if r := got["D"]; !strings.Contains(r.Reason, "straddles the target 10") {
		t.Errorf("D's reason %q does not say the interval straddles the target", r.Reason)
	}
	if r := got["F"]; r.USDPerSessionHour.Lo != 0 || !r.AtLeast {
		t.Errorf("F held every step: its cost interval %+v should reach down to 0", r.USDPerSessionHour)
	}
	if r := got["H"]; !strings.Contains(r.Reason, "warm-up too short") {
		t.Errorf("H's reason %q does not carry the error", r.Reason)
	}
	if res.Counts[Holds] != 4 || res.Counts[Skipped] != 1 {
		t.Errorf("counts %v", res.Counts)
	}
	if _, err := res.JSON(); err != nil {
		t.Errorf("JSON: %v (a cost with no upper bound must write as null)", err)
	}
}

// Simulate keeps the candidates' order whatever order they finish in,
// runs no skipped candidate, and says a line for each.
func TestSimulateKeepsOrder(t *testing.T) {
	var cands []Candidate
	for i := 1; i <= 5; i++ {
		c := Candidate{Index: i, Label: fmt.Sprint("c", i)}
		c.Config.Recipe.Name = c.Label
		if i == 3 {
			c.Skip = "over a constraint"
		}
		cands = append(cands, c)
	}
	var mu sync.Mutex
	ran := map[string]int{}
	fake := func(_ context.Context, cfg config.Run) (report.Summary, error) {
		mu.Lock()
		ran[cfg.Recipe.Name]++
		mu.Unlock()
		return report.Summary{RunDir: cfg.Recipe.Name}, nil
	}
	var progress strings.Builder
	outs := Simulate(context.Background(), cands, Options{Workers: 2, Run: fake, Progress: &progress})
	for i, o := range outs {
		if o.Index != i+1 {
			t.Errorf("outcome %d is candidate %d", i, o.Index)
		}
		if want := o.Label; o.Skip == "" && o.Summary.RunDir != want {
			t.Errorf("candidate %d got %q's summary", o.Index, o.Summary.RunDir)
		}
	}
	if len(ran) != 4 || ran["c3"] != 0 {
		t.Errorf("ran %v; want each candidate but the skipped one once", ran)
	}
	if n := strings.Count(progress.String(), "\n"); n != 5 {
		t.Errorf("%d progress lines, want 5:\n%s", n, progress.String())
	}
}

// TestCapacityOpenAbove: a candidate whose capacity interval runs to the top
// of its ladder unmeasured (the top step held; the crossing was
// interpolated below it) read "22.4 (21.35-24)" in recommend's table, a
// closed interval, and its cost "2.57 (0.00-2.70)" then had no reason
// shown for its floor of 0; the capacity now reads "21.35->=24".
func TestCapacityOpenAbove(t *testing.T) {
	o := outcome(1, 32, sweep.Capacity{Sessions: 22.4, Lo: 21.35, Hi: 24, HiOpen: true, LimitedBy: "ttft"}, 15)
	res := Rank(Space{File: "s.yaml"}, []Outcome{o})
	if got := capacityText(res.Candidates[0]); got != "22.4 (21.35->=24)" {
		t.Errorf("capacity %q, want 22.4 (21.35->=24)", got)
	}
}
