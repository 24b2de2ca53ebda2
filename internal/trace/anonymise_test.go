package trace

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// blockPattern describes which blocks of a set of traces repeat: for every
// (trace, request, block) position, the first position that holds the same
// id within the scope. Two sets with the same pattern give a replay's cache
// the same hits.
func blockPattern(traces []Trace) []string {
	var out []string
	global := map[int64]string{}
	for ti, t := range traces {
		seen := global
		if t.HashIDScope == "local" {
			seen = map[int64]string{}
		}
		for k, tu := range t.Turns() {
			for b, id := range tu.HashIDs {
				here := fmt.Sprintf("%d/%d/%d", ti, k, b)
				if first, ok := seen[id]; ok {
					out = append(out, here+"="+first)
				} else {
					seen[id] = here
				}
			}
		}
	}
	return out
}

// shape is what a replay reads of a trace: each turn's agent (by order of
// appearance), lengths and times.
func shape(t Trace) string {
	var b strings.Builder
	agents := map[string]int{}
	for _, tu := range t.Turns() {
		a := 0
		if tu.Agent != "" {
			if _, ok := agents[tu.Agent]; !ok {
				agents[tu.Agent] = len(agents) + 1
			}
			a = agents[tu.Agent]
		}
		fmt.Fprintf(&b, "%d:%d/%d@%g+%g,%g;", a, tu.In, tu.Out, tu.Start, tu.ThinkTime, tu.APITime)
	}
	return b.String()
}

func readTestdata(t *testing.T) []Trace {
	t.Helper()
	var all []Trace
	for _, name := range []string{"testdata/small.jsonl", "testdata/subagent.json.gz"} {
		ts, err := ReadPath(name)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ts...)
	}
	return all
}

// TestAnonymiseKeepsTheShape: the published traces (subagents included)
// come out renamed, renumbered and reordered, with every turn's lengths,
// times and agent, and the same repeating blocks, as before; the input is
// left alone, and the output reads back.
func TestAnonymiseKeepsTheShape(t *testing.T) {
	in := readTestdata(t)
	before := fmt.Sprint(in[3].Requests[0].HashIDs[:3], in[3].Requests[16].AgentID)
	out := Anonymise(in, []byte("salt one"))
	if after := fmt.Sprint(in[3].Requests[0].HashIDs[:3], in[3].Requests[16].AgentID); after != before {
		t.Fatalf("the input changed: %s, was %s", after, before)
	}
	if len(out) != len(in) {
		t.Fatalf("%d traces out of %d", len(out), len(in))
	}
	byShape := map[string]Trace{}
	for _, tr := range in {
		byShape[shape(tr)] = tr
	}

	for i, tr := range out {

		if want := fmt.Sprintf("trace_%04d", i+1); tr.ID != want {
			t.Errorf("trace %d is named %q, want %q", i, tr.ID, want)
		}
		orig, ok := byShape[shape(tr)]
		if !ok {
			t.Fatalf("%s: no input trace has its turns", tr.ID)
		}
		if fmt.Sprint(blockPattern([]Trace{tr})) != fmt.Sprint(blockPattern([]Trace{orig})) {
			t.Errorf("%s: its repeating blocks differ from %s's", tr.ID, orig.ID)
		}
		if tr.Totals != nil {
			t.Errorf("%s: totals kept", tr.ID)
		}
		top := int64(0)
		for _, tu := range tr.Turns() {
			for _, id := range tu.HashIDs {
				top = maxOf(top, id)
			}
		}
		if distinct := countDistinct(tr); int64(distinct) != top {
			t.Errorf("%s: ids run to %d for %d distinct blocks: not numbered from 1", tr.ID, top, distinct)
		}
	}
	// The subagents are renamed in order of appearance.
	for _, tr := range out {
		var agents []string
		for _, r := range tr.Requests {
			if r.IsSubagent() {
				agents = append(agents, r.AgentID)
			}
		}
		if len(agents) > 0 && fmt.Sprint(agents) != "[agent_001 agent_002]" {
			t.Errorf("%s: subagents %v", tr.ID, agents)
		}
	}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, out); err != nil {
		t.Fatal(err)
	}
	back, err := Read(&buf, "anonymised")
	if err != nil {
		t.Fatal(err)
	}
	for _, orig := range []string{"trace_0187", "trace_0504", "trace_0538", "trace_0291"} {
		if bytes.Contains(buf.Bytes(), []byte(orig)) {
			t.Errorf("the output still names %s", orig)
		}
	}
	if len(back) != len(out) {
		t.Errorf("read back %d traces", len(back))
	}
}

// TestAnonymiseOrderFollowsTheSalt: the same salt gives the same output,
// other salts other orders.
func TestAnonymiseOrderFollowsTheSalt(t *testing.T) {
	in := Synthesize(SynthOptions{Sessions: 12, Seed: 3, HeavyShare: 0.5})
	first := func(salt string) []string {
		var s []string
		for _, tr := range Anonymise(in, []byte(salt)) {
			s = append(s, shape(tr))
		}
		return s
	}
	a, again := first("a"), first("a")
	if !slices.Equal(a, again) {
		t.Error("the same salt gave two orders")
	}
	differ := 0
	for _, salt := range []string{"b", "c", "d"} {
		if !slices.Equal(a, first(salt)) {
			differ++
		}
	}
	if differ == 0 {
		t.Error("three other salts all gave the same order")
	}
}

// TestAnonymiseGlobalScopeKeepsSharingAcrossTraces: with global ids, a
// block two traces share is still shared after.
func TestAnonymiseGlobalScopeKeepsSharingAcrossTraces(t *testing.T) {
	in := []Trace{
		{ID: "x", HashIDScope: "global", Requests: []Request{{In: 128, HashIDs: []int64{900, 901}}}},
		{ID: "y", HashIDScope: "global", Requests: []Request{{In: 128, HashIDs: []int64{900, 777}}}},
	}
	out := Anonymise(in, []byte("s"))
	a, b := out[0].Requests[0].HashIDs, out[1].Requests[0].HashIDs
	if a[0] != b[0] || a[1] == b[1] || a[0] != 1 {
		t.Errorf("ids %v and %v: want the shared first block kept (as 1) and the others apart", a, b)
	}
	local := Anonymise([]Trace{{ID: "x", HashIDScope: "local", Requests: in[0].Requests}, {ID: "y", HashIDScope: "local", Requests: in[1].Requests}}, []byte("s"))
	if fmt.Sprint(local[0].Requests[0].HashIDs, local[1].Requests[0].HashIDs) != "[1 2] [1 2]" {
		t.Errorf("local ids %v %v: want each trace numbered from 1", local[0].Requests[0].HashIDs, local[1].Requests[0].HashIDs)
	}
}

func countDistinct(t Trace) int {
	seen := map[int64]bool{}
	for _, tu := range t.Turns() {
		for _, id := range tu.HashIDs {
			seen[id] = true
		}
	}
	return len(seen)
}

func maxOf(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
