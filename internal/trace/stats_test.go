package trace

import (
	"fmt"
	"testing"
)

// withIns is a trace whose calls have the given prompts; answers are in/100.
func withIns(id string, ins ...int) Trace {
	tr := Trace{ID: id}
	for i, in := range ins {
		tr.Requests = append(tr.Requests, Request{T: float64(i), Type: "n", In: in, Out: in / 100})
	}
	return tr
}

func TestPromptLength(t *testing.T) {
	cases := []struct {
		name string
		tr   Trace
		want int
	}{
		// Odd count: the middle one.
		{"odd", withIns("a", 30, 10, 20), 20},
		// Even count: the lower middle.
		{"even", withIns("a", 40, 10, 30, 20), 20},
		// Subagent calls count too.
		{"with a subagent", Trace{Requests: []Request{mcall(0, 100), sub(1, "s", mcall(0, 1), mcall(1, 2))}}, 2},
		// Nothing to measure.
		{"empty", Trace{}, 0},
	}
	for _, c := range cases {
		if got := PromptLength(c.tr); got != c.want {
			t.Errorf("%s: PromptLength %d, want %d", c.name, got, c.want)
		}
	}
}

func TestTiers(t *testing.T) {
	cases := []struct {
		name         string
		n            int
		heavy, light []string
	}{
		// Eight traces: quarters of two.
		{"eight", 8, []string{"t6", "t7"}, []string{"t0", "t1"}},
		// Ten traces: a quarter is two (rounded down).
		{"ten", 10, []string{"t8", "t9"}, []string{"t0", "t1"}},
		// Fewer than four: one each.
		{"two", 2, []string{"t1"}, []string{"t0"}},
		// None: empty tiers.
		{"none", 0, nil, nil},
	}
	for _, c := range cases {
		var traces []Trace
		for i := c.n - 1; i >= 0; i-- { // reverse order: Tiers must sort
			traces = append(traces, withIns(fmt.Sprintf("t%d", i), 1000*(i+1)))
		}
		h, l := Tiers(traces)
		if ids(h) != fmt.Sprint(c.heavy) && !(len(h) == 0 && c.heavy == nil) {
			t.Errorf("%s: heavy %v, want %v", c.name, ids(h), c.heavy)
		}
		if ids(l) != fmt.Sprint(c.light) && !(len(l) == 0 && c.light == nil) {
			t.Errorf("%s: light %v, want %v", c.name, ids(l), c.light)
		}
	}
}

func ids(ts []Trace) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.ID)
	}
	return fmt.Sprint(s)
}

func TestDescribe(t *testing.T) {
	traces := []Trace{
		withIns("a", 10000, 200000, 140000, 50000),
		{ID: "b", Requests: []Request{mcall(0, 20000), sub(1, "s", Request{Type: "n", In: 30000, Out: 700})}},
	}
	got := Describe("x", traces)
	// Prompts sorted: 10K 20K 30K 50K 140K 200K; answers: 1 100 500 700 1400 2000.
	want := TierStats{Name: "x", Traces: 2, Requests: 6, MedianPrompt: 30000, P90Prompt: 200000,
		Over128K: 2.0 / 6, MedianAnswer: 500, WithSubagents: 0.5}
	if got != want {
		t.Errorf("Describe:\n got %+v\nwant %+v", got, want)
	}
	if empty := Describe("none", nil); empty.Requests != 0 || empty.MedianPrompt != 0 {
		t.Errorf("Describe of nothing: %+v", empty)
	}
}
