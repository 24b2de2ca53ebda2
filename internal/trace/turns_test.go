package trace

import (
	"slices"
	"testing"
)

func mcall(t float64, in int) Request { return Request{T: t, Type: "n", In: in, Out: 1} }

func sub(t float64, agent string, reqs ...Request) Request {
	return Request{T: t, Type: Subagent, AgentID: agent, Requests: reqs}
}

func TestTurns(t *testing.T) {
	type got struct {
		agent string
		in    int
		start float64
	}
	cases := []struct {
		name string
		reqs []Request
		want []got
	}{
		// Plain calls keep their order.
		{"no subagents", []Request{mcall(0, 1), mcall(5, 2)}, []got{{"", 1, 0}, {"", 2, 5}}},
		// Child times below the spawn time are relative to the spawn (Claude Code captures).
		{"relative child times", []Request{mcall(0, 1), sub(10, "a", mcall(0, 10), mcall(4, 11)), mcall(12, 2)},
			[]got{{"", 1, 0}, {"a", 10, 10}, {"", 2, 12}, {"a", 11, 14}}},
		// Child times at or after the spawn are session-absolute.
		{"absolute child times", []Request{mcall(0, 1), sub(10, "a", mcall(10, 10), mcall(14, 11)), mcall(12, 2)},
			[]got{{"", 1, 0}, {"a", 10, 10}, {"", 2, 12}, {"a", 11, 14}}},
		// A relative group stays relative even when later children pass the spawn time.
		{"long relative group", []Request{sub(3, "a", mcall(0, 10), mcall(50, 11))},
			[]got{{"a", 10, 3}, {"a", 11, 53}}},
		// Parallel subagents interleave by start time; ties keep trace order.
		{"parallel subagents", []Request{mcall(0, 1), sub(5, "a", mcall(0, 10), mcall(2, 11)), sub(5, "b", mcall(0, 20), mcall(1, 21))},
			[]got{{"", 1, 0}, {"a", 10, 5}, {"b", 20, 5}, {"b", 21, 6}, {"a", 11, 7}}},
		// Nested subagents are flattened with their own agent id.
		{"nested", []Request{sub(2, "a", mcall(0, 10), sub(1, "b", mcall(0, 20)))},
			[]got{{"a", 10, 2}, {"b", 20, 3}}},
	}
	for _, c := range cases {
		turns := Trace{ID: "x", Requests: c.reqs}.Turns()
		var g []got
		for i, tu := range turns {
			if tu.Index != i {
				t.Errorf("%s: turn %d has index %d", c.name, i, tu.Index)
			}
			g = append(g, got{tu.Agent, tu.In, tu.Start})
		}
		if !slices.Equal(g, c.want) {
			t.Errorf("%s: turns %v, want %v", c.name, g, c.want)
		}
	}
}

func TestTurnsRealSubagents(t *testing.T) {
	traces, err := ReadPath("testdata/subagent.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	turns := traces[0].Turns()
	agents := map[string]int{}
	for i, tu := range turns {
		agents[tu.Agent]++
		if i > 0 && tu.Start < turns[i-1].Start {
			t.Errorf("turn %d starts at %g, before turn %d at %g", i, tu.Start, i-1, turns[i-1].Start)
		}
	}
	// trace_0291: 20 parent calls, agent_001 with 5 and agent_002 with 7, spawned at 1148 s and 1180.6 s.
	want := map[string]int{"": 20, "agent_001": 5, "agent_002": 7}
	for a, n := range want {
		if agents[a] != n {
			t.Errorf("agent %q has %d turns, want %d", a, agents[a], n)
		}
	}
	for _, tu := range turns {
		if tu.Agent == "agent_001" && tu.Start < 1148 {
			t.Errorf("agent_001 turn at %g s, before its spawn at 1148 s", tu.Start)
		}
	}
}
