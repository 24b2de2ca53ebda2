package fidelity

import (
	"strings"
	"testing"

	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

func ptr(v float64) *float64 { return &v }

// sweepOf is a sweep of ladder [5, 10, 15, 20] with the given capacity;
// given in flight per session, only that many steps ran, carrying it.
func sweepOf(n int, m Mix, c sweep.Capacity, inFlight ...float64) Sweep {
	w := Sweep{Recipe: n, Mix: m, Summary: report.Summary{Capacity: c}}
	ladder := []int{5, 10, 15, 20}
	if len(inFlight) > 0 {
		ladder = ladder[:len(inFlight)]
	}
	for i, s := range ladder {
		st := report.Step{Sessions: s, Verdict: verdict.Pass}
		st.Load.Sent = 10
		if i < len(inFlight) {
			st.Load.InFlightPerSession = inFlight[i]
		}
		w.Summary.Steps = append(w.Summary.Steps, st)
	}
	return w
}

func point(s, lo, hi float64, limit string) sweep.Capacity {
	return sweep.Capacity{Sessions: s, Lo: lo, Hi: hi, LimitedBy: limit}
}

// TestCapacityTolerance: a capacity holds within the published interval
// (or figure) widened by one ladder step, whatever kind of figure the
// report printed.
func TestCapacityTolerance(t *testing.T) {
	cases := []struct {
		name string
		fig  Figure
		cap  sweep.Capacity
		want Status
	}{
		{"approx 10, simulated 10.2", Figure{Text: "≈ 10", Value: 10, Bound: Approx}, point(10.2, 9, 11, "ttft"), Held},
		{"approx 10, simulated 14.9: within a step of 5", Figure{Text: "≈ 10", Value: 10, Bound: Approx}, point(14.9, 14, 15, "ttft"), Held},
		{"approx 10, simulated 15.5: past a step", Figure{Text: "≈ 10", Value: 10, Bound: Approx}, point(15.5, 15, 16, "ttft"), Missed},
		{"interval 13.7-15, simulated 19", Figure{Text: "≈ 14 (13.7–15)", Value: 14, Low: 13.7, High: 15, Bound: Approx}, point(19, 18, 20, "ttft"), Held},
		{"interval 13.7-15, simulated 8.5", Figure{Text: "≈ 14 (13.7–15)", Value: 14, Low: 13.7, High: 15, Bound: Approx}, point(8.5, 8, 9, "ttft"), Missed},
		{"at least 20, every step passed", Figure{Text: "≥ 20", Low: 20, Bound: AtLeast}, sweep.Capacity{Sessions: 20, Lo: 20, Hi: 20, AtLeast: true, LimitedBy: "not reached"}, Held},
		{"at least 20, simulated 16: within a step", Figure{Text: "≥ 20", Low: 20, Bound: AtLeast}, point(16, 15, 17, "interactivity"), Held},
		{"at least 20, simulated 12", Figure{Text: "≥ 20", Low: 20, Bound: AtLeast}, point(12, 11, 13, "interactivity"), Missed},
		{"below 5, below the first step", Figure{Text: "< 5", High: 5, Bound: Below}, sweep.Capacity{BelowFirst: true, LimitedBy: "ttft"}, Held},
		{"below 5, simulated 9.9", Figure{Text: "< 5", High: 5, Bound: Below}, point(9.9, 9, 10, "ttft"), Held},
		{"below 5, simulated 10: a step past", Figure{Text: "< 5", High: 5, Bound: Below}, point(10, 10, 10, "ttft"), Missed},
		{"about 20, every step passed to 20", Figure{Text: "≈ 20", Value: 20, Bound: Approx}, sweep.Capacity{Sessions: 20, AtLeast: true, LimitedBy: "not reached"}, Held},
		{"about 7, every step passed to 20", Figure{Text: "≈ 7", Value: 7, Bound: Approx}, sweep.Capacity{Sessions: 20, AtLeast: true, LimitedBy: "not reached"}, Missed},
		{"approx 4, below the first step of 5", Figure{Text: "≈ 4", Value: 4, Bound: Approx}, sweep.Capacity{BelowFirst: true, LimitedBy: "ttft"}, Held},
		{"no data is never held", Figure{Text: "≈ 10", Value: 10, Bound: Approx}, sweep.Capacity{Sessions: 10, LimitedBy: "no data: ttft_seconds"}, Missed},
	}
	for _, c := range cases {
		got := capacityCell(0, ColCapacity, c.fig, sweepOf(0, Today, c.cap), true, true)
		if got.Status != c.want {
			t.Errorf("%s: %s (simulated %s, tolerance %s), want %s", c.name, got.Status, got.Simulated, got.Tolerance, c.want)
		}
	}
}

// TestCostTolerance: $ per session-hour within 10%, $ per million tokens
// within 25%, an upper bound ("≤ 2.88") within 10% above it; no figure
// is a miss that says why.
func TestCostTolerance(t *testing.T) {
	w := sweepOf(0, Today, point(10, 9, 11, "ttft"))
	cases := []struct {
		col       string
		fig       Figure
		got       *float64
		tol       float64
		want      Status
		simulated string
	}{
		{ColSessionHour, Figure{Text: "2.88", Value: 2.88}, ptr(2.60), 0.10, Held, "2.60, -10%"},
		{ColSessionHour, Figure{Text: "2.88", Value: 2.88}, ptr(2.55), 0.10, Missed, "2.55, -11%"},
		{ColMTok, Figure{Text: "0.63", Value: 0.63}, ptr(0.48), 0.25, Held, "0.48, -24%"},
		{ColMTok, Figure{Text: "0.63", Value: 0.63}, ptr(0.25), 0.25, Missed, "0.25, -60%"},
		{ColSessionHour, Figure{Text: "≤ 2.88", High: 2.88, Bound: AtMost}, ptr(3.1), 0.10, Held, "3.10"},
		{ColSessionHour, Figure{Text: "≤ 2.88", High: 2.88, Bound: AtMost}, ptr(3.2), 0.10, Missed, "3.20"},
		{ColMTok, Figure{Text: "0.63", Value: 0.63}, nil, 0.25, Missed, "n/a"},
	}
	for _, c := range cases {
		w.Summary.Cost = sweep.Cost{USDPerSessionHour: c.got, USDPerMillionTokens: c.got}
		got := costCell(0, c.col, c.fig, w, true, c.tol)
		if got.Status != c.want || got.Simulated != c.simulated {
			t.Errorf("%s %s against %v: %s %q, want %s %q", c.col, c.fig.Text, c.got, got.Status, got.Simulated, c.want, c.simulated)
		}
		if got.Status != Held && got.Simulated == "n/a" && got.Why == "" {
			t.Errorf("%s: a cost with no figure says nothing of why", c.col)
		}
	}
}

// TestLimitCell: the limiting part must be the same; "not reached" must
// hold up to the published step.
func TestLimitCell(t *testing.T) {
	ttft := Published{Recipe: 0, Limit: LimitTTFT}
	if c := limitCell(ttft, sweepOf(0, Today, point(10, 9, 11, "ttft")), true); c.Status != Held {
		t.Errorf("ttft against ttft: %s", c.Status)
	}
	if c := limitCell(ttft, sweepOf(0, Today, point(10, 9, 11, "interactivity")), true); c.Status != Missed || c.Simulated != "interactivity" {
		t.Errorf("interactivity against ttft: %s %q", c.Status, c.Simulated)
	}
	seven := Published{Recipe: 7, Limit: LimitNotReached, Capacity: &Figure{Text: "≥ 20", Low: 20, Bound: AtLeast}}
	at := func(s float64) sweep.Capacity {
		return sweep.Capacity{Sessions: s, Lo: s, Hi: s, AtLeast: true, LimitedBy: "not reached"}
	}
	if c := limitCell(seven, sweepOf(7, Today, at(20)), true); c.Status != Held || c.Simulated != "not reached at 20" {
		t.Errorf("not reached at 20: %s %q", c.Status, c.Simulated)
	}
	if c := limitCell(seven, sweepOf(7, Today, at(15)), true); c.Status != Missed {
		t.Errorf("not reached at 15 against 'not reached at 20': %s", c.Status)
	}
	if c := limitCell(ttft, Sweep{}, false); c.Status != NotRun {
		t.Errorf("no sweep: %s", c.Status)
	}
}

func studyOf(caps map[int]sweep.Capacity) Study {
	var s Study
	for n, c := range caps {
		s.Sweeps = append(s.Sweeps, sweepOf(n, Today, c))
	}
	return s
}

// TestOrdering: 7 >= 6 > 3 > 1 >= 5 >= 0 on today's capacities; >= holds
// while the intervals overlap, > needs the centre above.
func TestOrdering(t *testing.T) {
	good := map[int]sweep.Capacity{
		7: {Sessions: 20, Lo: 20, Hi: 20, AtLeast: true}, 6: point(19, 18, 20, "ttft"), 3: point(14, 13.7, 15, "ttft"),
		1: point(11, 10, 12, "interactivity"), 5: point(10.5, 10, 11.2, "interactivity"), 0: point(10.2, 9.5, 10.6, "ttft"),
	}
	if c := ordering(studyOf(good)); c.Status != Held {
		t.Errorf("the published order: %s (%s)", c.Status, c.Simulated)
	}
	// 5 above 1 with overlapping intervals is still 1 >= 5.
	tie := map[int]sweep.Capacity{}
	for k, v := range good {
		tie[k] = v
	}
	tie[5] = point(11.5, 10.5, 12, "interactivity")
	if c := ordering(studyOf(tie)); c.Status != Held {
		t.Errorf("1 and 5 overlapping: %s (%s)", c.Status, c.Simulated)
	}
	// 3 above 6 breaks 6 > 3.
	bad := map[int]sweep.Capacity{}
	for k, v := range good {
		bad[k] = v
	}
	bad[3] = point(19.5, 19, 20, "ttft")
	c := ordering(studyOf(bad))
	if c.Status != Missed || !strings.Contains(c.Simulated, "6 (19.0) > 3 (19.5) ✗") {
		t.Errorf("3 above 6: %s (%s)", c.Status, c.Simulated)
	}
}

// TestHostCacheAndInFlight: the host cache adds nothing while its recipe
// is not above the twin with the intervals apart; light-only keeps more in
// flight than heavy-only at every step both ran.
func TestHostCacheAndInFlight(t *testing.T) {
	s := studyOf(map[int]sweep.Capacity{5: point(10.5, 10, 11.2, "interactivity"), 1: point(11, 10, 12, "interactivity")})
	if c := hostCache(s, 5, 1); c.Status != Held {
		t.Errorf("5 under 1: %s", c.Status)
	}
	s = studyOf(map[int]sweep.Capacity{5: point(14, 13.5, 15, "interactivity"), 1: point(11, 10, 12, "interactivity")})
	if c := hostCache(s, 5, 1); c.Status != Missed {
		t.Errorf("5 above 1 with the intervals apart: %s", c.Status)
	}
	light := sweepOf(0, LightOnly, point(8, 7, 9, "ttft"), 1.2, 1.3, 1.1)
	heavy := sweepOf(0, HeavyOnly, point(8, 7, 9, "ttft"), 1.0, 1.0)
	if c := lightOverHeavy(0, light, heavy); c.Status != Held || c.Simulated != "5: 1.20 vs 1.00; 10: 1.30 vs 1.00" {
		t.Errorf("light above heavy: %s %q", c.Status, c.Simulated)
	}
	heavy = sweepOf(0, HeavyOnly, point(8, 7, 9, "ttft"), 1.0, 1.4)
	if c := lightOverHeavy(0, light, heavy); c.Status != Missed {
		t.Errorf("heavy above light at 10: %s", c.Status)
	}
}

// TestCompareNamesUnreachable: a missed cell named by the model's limits
// reads unreachable with the reason; a held one stays held.
func TestCompareNamesUnreachable(t *testing.T) {
	f := File{Bar: Bar{Target: 15, Stress: 20}, Recipes: []Published{{
		Recipe: 0, Name: "vllm", Title: "0", Limit: LimitTTFT,
		Capacity: &Figure{Text: "≈ 10", Value: 10, Bound: Approx}, USDPerMTok: &Figure{Text: "0.63", Value: 0.63},
	}}}
	w := sweepOf(0, Today, point(10.2, 9.5, 10.6, "ttft"))
	w.Summary.Cost.USDPerMillionTokens = ptr(0.30)
	tab := Compare(f, Study{Sweeps: []Sweep{w}}, map[string]string{LimitKey(0, ColMTok): "the model's reason", LimitKey(0, ColCapacity): "never used"})
	if c, _ := tab.Cell(0, ColMTok); c.Status != Unreachable || c.Why != "the model's reason" {
		t.Errorf("$/M: %s %q", c.Status, c.Why)
	}
	if c, _ := tab.Cell(0, ColCapacity); c.Status != Held || c.Why != "" {
		t.Errorf("capacity: %s %q", c.Status, c.Why)
	}
}

// TestCompareNamesADraw: a missed cell whose reason starts with DrawPrefix
// reads as this sweep's draw, not out of the model's reach, and says so.
func TestCompareNamesADraw(t *testing.T) {
	f := File{Bar: Bar{Target: 15, Stress: 20}, Recipes: []Published{{
		Recipe: 1, Name: "sglang", Title: "1", Limit: LimitInteractivity,
		USDPerSessionHour: &Figure{Text: "2.72", Value: 2.72},
	}}}
	w := sweepOf(1, Today, point(9.6, 6.7, 12.2, "interactivity"))
	w.Summary.Cost.USDPerSessionHour = ptr(3.00)
	tab := Compare(f, Study{Sweeps: []Sweep{w}}, map[string]string{LimitKey(1, ColSessionHour): DrawPrefix + "one sweep's capacity"})
	c, _ := tab.Cell(1, ColSessionHour)
	if c.Status != Draw || c.Why != "one sweep's capacity" {
		t.Fatalf("$/session-hour: %s %q, want a draw with the prefix cut", c.Status, c.Why)
	}
	if m, w := mark(c), statusWords(c.Status); m != "✗ this sweep's draw" || w != "Missed on this sweep's draw" {
		t.Errorf("rendered %q and %q", m, w)
	}
}
