package trace

import (
	"slices"
	"testing"
)

func TestOverContext(t *testing.T) {
	cases := []struct {
		name string
		turn Turn
		n    int
		want bool
	}{
		// Prompt plus answer cap exactly fills the context: vLLM serves it.
		{"fills it", Turn{In: 900, Out: 100}, 1000, false},
		// One token more than the context is refused.
		{"one over", Turn{In: 901, Out: 100}, 1000, true},
		// A prompt that fits alone is refused when its answer cap does not.
		{"cap pushes it over", Turn{In: 999, Out: 2}, 1000, true},
		// A recorded answer of 0 is still sent with max_tokens 1.
		{"zero answer counts as one", Turn{In: 1000, Out: 0}, 1000, true},
		// An unknown context (0) holds everything.
		{"unknown context", Turn{In: 1 << 30, Out: 1}, 0, false},
	}
	for _, c := range cases {
		if got := OverContext(c.turn, c.n); got != c.want {
			t.Errorf("%s: OverContext(%+v, %d) = %v, want %v", c.name, c.turn, c.n, got, c.want)
		}
	}
}

func TestContextCountAdd(t *testing.T) {
	turns := []Turn{
		{In: 10, Out: 1},                 // fits
		{In: 200, Out: 1},                // over
		{Agent: "a", In: 50, Out: 1},     // subagent, fits
		{Agent: "a", In: 100, Out: 10},   // subagent, over by its cap
		{Agent: "b", In: 100, Out: 0},    // subagent, fills it exactly
		{In: 100, Out: 2},                // over by its cap
		{Agent: "b", In: 1000, Out: 500}, // subagent, over
	}
	c := ContextCount{Tier: "heavy"}
	c.Add(turns, 101)
	want := ContextCount{Tier: "heavy", Turns: 7, Over: 4, SubagentTurns: 4, SubagentOver: 2}
	if c != want {
		t.Errorf("Add: got %+v, want %+v", c, want)
	}
	if got := c.Share(); got != 4.0/7 {
		t.Errorf("Share = %g, want %g", got, 4.0/7)
	}
	if got := (ContextCount{}).Share(); got != 0 {
		t.Errorf("Share of nothing = %g, want 0", got)
	}
}

func TestCountOverContext(t *testing.T) {
	traces := []Trace{
		{ID: "x", Requests: []Request{mcall(0, 50), sub(1, "a", mcall(0, 300)), mcall(5, 200)}},
		{ID: "y", Requests: []Request{mcall(0, 99), mcall(1, 100)}},
	}
	// mcall answers 1 token: a prompt of 100 needs 101.
	got := CountOverContext("light", traces, 100)
	want := ContextCount{Tier: "light", Turns: 5, Over: 3, SubagentTurns: 1, SubagentOver: 1}
	if got != want {
		t.Errorf("CountOverContext: got %+v, want %+v", got, want)
	}
	over, calls := CountPromptsOver(traces, 100)
	if over != 2 || calls != 5 {
		t.Errorf("CountPromptsOver: %d of %d, want 2 of 5 (prompts alone, 100 is not over 100)", over, calls)
	}
}

func TestTrimToContext(t *testing.T) {
	const n = 100
	p := func(in int) Turn { return Turn{In: in, Out: 1} }
	s := func(agent string, in int) Turn { return Turn{Agent: agent, In: in, Out: 1} }
	cases := []struct {
		name  string
		turns []Turn
		keep  []int // indices of the turns kept
		drop  ContextCount
	}{
		// Everything fits: nothing goes.
		{"all fit", []Turn{p(10), s("a", 20), p(30)}, []int{0, 1, 2}, ContextCount{}},
		// A parent turn over the context cuts the parent there; a later
		// parent turn that would fit again (after a compaction) goes too.
		{"parent cut", []Turn{p(10), p(50), p(200), p(20), p(300)}, []int{0, 1}, ContextCount{Dropped: 3}},
		// A subagent spawned before the cut keeps running, even its turns
		// after the cut; one spawned at or after the cut goes.
		{"subagents either side of the cut", []Turn{p(10), s("a", 20), p(200), s("a", 30), s("b", 5), p(40)},
			[]int{0, 1, 3}, ContextCount{Dropped: 3, SubagentDropped: 1}},
		// A subagent's own turn over the context cuts that subagent only.
		{"subagent cut", []Turn{p(10), s("a", 20), s("a", 150), p(30), s("a", 10), s("b", 10), p(40)},
			[]int{0, 1, 3, 5, 6}, ContextCount{Dropped: 2, SubagentDropped: 2}},
		// The first turn over the context leaves nothing of the parent.
		{"first turn over", []Turn{p(500), p(10)}, nil, ContextCount{Dropped: 2}},
	}
	for _, c := range cases {
		for i := range c.turns {
			c.turns[i].Index = i
		}
		kept, drop := TrimToContext(c.turns, n)
		var idx []int
		for _, k := range kept {
			idx = append(idx, k.Index)
		}
		if !slices.Equal(idx, c.keep) {
			t.Errorf("%s: kept turns %v, want %v", c.name, idx, c.keep)
		}
		if drop != c.drop {
			t.Errorf("%s: counts %+v, want %+v", c.name, drop, c.drop)
		}
		if len(kept)+drop.Dropped != len(c.turns) {
			t.Errorf("%s: %d kept + %d dropped != %d turns", c.name, len(kept), drop.Dropped, len(c.turns))
		}
	}
	// An unknown context keeps everything.
	turns := []Turn{p(1 << 20)}
	if kept, drop := TrimToContext(turns, 0); len(kept) != 1 || drop.Dropped != 0 {
		t.Errorf("unknown context: kept %d, dropped %d; want all kept", len(kept), drop.Dropped)
	}
}

// TestSharedCorpusContext counts the shared corpus's calls against a 512K
// and a 128K context. It skips when the corpus is absent, unless
// HEADROOM_REQUIRE_SHARED=1.
func TestSharedCorpusContext(t *testing.T) {
	traces := readSharedCorpus(t)
	heavy, light := Tiers(traces)
	for _, n := range []int{524288, 131072} {
		over, calls := CountPromptsOver(traces, n)
		all := CountOverContext("all", traces, n)
		h, l := CountOverContext("heavy", heavy, n), CountOverContext("light", light, n)
		t.Logf("context %d: prompts over it %d of %d calls; prompt+cap over it %d (%d subagent); heavy %d of %d (%.1f%%), light %d of %d (%.1f%%)",
			n, over, calls, all.Over, all.SubagentOver, h.Over, h.Turns, 100*h.Share(), l.Over, l.Turns, 100*l.Share())
		if all.Turns != calls {
			t.Errorf("context %d: %d turns but %d model calls", n, all.Turns, calls)
		}
		if all.Over < over {
			t.Errorf("context %d: %d turns over with their cap, fewer than the %d prompts over alone", n, all.Over, over)
		}
	}
	// Measured on the corpus: 206 of its 34,150 prompts alone are longer
	// than 524,288 tokens, and one more (523,020 prompt tokens, a 1,272-token
	// answer) is refused with its cap: 207, the figure issue 11 quotes. All
	// of them are the session's own calls, none a subagent's.
	if over, calls := CountPromptsOver(traces, 524288); over != 206 || calls != 34150 {
		t.Errorf("prompts over 524,288 tokens: %d of %d, want 206 of 34150", over, calls)
	}
	if c := CountOverContext("all", traces, 524288); c.Over != 207 || c.SubagentOver != 0 {
		t.Errorf("turns over a 524,288-token context with their cap: %d (%d subagent), want 207 (0)", c.Over, c.SubagentOver)
	}
}
