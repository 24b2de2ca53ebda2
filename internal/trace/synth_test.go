package trace

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestSynthesizeCalibration checks that the tiers of a half-and-half mix
// reproduce the published AgentX table within 10% (shares within 10% relative).
func TestSynthesizeCalibration(t *testing.T) {
	out := Synthesize(SynthOptions{Sessions: 400, Seed: 1, HeavyShare: 0.5})
	heavy, light := Tiers(out)
	cases := []struct {
		got  TierStats
		want TierStats // the published figures
	}{
		{Describe("heavy", heavy), TierStats{MedianPrompt: 149000, P90Prompt: 209000, Over128K: 0.64, MedianAnswer: 461, WithSubagents: 0.09}},
		{Describe("light", light), TierStats{MedianPrompt: 47000, P90Prompt: 98000, Over128K: 0.05, MedianAnswer: 274, WithSubagents: 0.47}},
	}
	for _, c := range cases {
		g, w := c.got, c.want
		t.Logf("%-5s traces %d requests %d: median prompt %d (published %d), p90 %d (%d), over 128K %.1f%% (%.0f%%), median answer %d (%d), with subagents %.1f%% (%.0f%%)",
			g.Name, g.Traces, g.Requests, g.MedianPrompt, w.MedianPrompt, g.P90Prompt, w.P90Prompt, 100*g.Over128K, 100*w.Over128K,
			g.MedianAnswer, w.MedianAnswer, 100*g.WithSubagents, 100*w.WithSubagents)
		figures := []struct {
			what      string
			got, want float64
		}{
			{"median prompt", float64(g.MedianPrompt), float64(w.MedianPrompt)},
			{"p90 prompt", float64(g.P90Prompt), float64(w.P90Prompt)},
			{"prompts over 128K", g.Over128K, w.Over128K},
			{"median answer", float64(g.MedianAnswer), float64(w.MedianAnswer)},
			{"traces with subagents", g.WithSubagents, w.WithSubagents},
		}
		for _, f := range figures {
			if math.Abs(f.got/f.want-1) > 0.10 {
				t.Errorf("%s %s: %g, want %g within 10%%", g.Name, f.what, f.got, f.want)
			}
		}
		if g.Traces != 100 {
			t.Errorf("%s: %d traces, want a quarter of 400", g.Name, g.Traces)
		}
	}
	// The tiers are the synthesised tiers: the cut does not mix them.
	for _, tr := range heavy {
		if !strings.HasPrefix(tr.ID, "heavy-") {
			t.Errorf("heavy tier holds %s", tr.ID)
		}
	}
	for _, tr := range light {
		if !strings.HasPrefix(tr.ID, "light-") {
			t.Errorf("light tier holds %s", tr.ID)
		}
	}
}

func TestSynthesizeShapes(t *testing.T) {
	out := Synthesize(SynthOptions{Sessions: 40, Seed: 7})
	var thinks []float64
	for _, tr := range out {
		if tr.BlockSize != 64 {
			t.Fatalf("%s: block size %d, want 64", tr.ID, tr.BlockSize)
		}
		parent := 0
		var prev *Request
		for i := range tr.Requests {
			r := &tr.Requests[i]
			if r.IsSubagent() {
				checkSubagent(t, tr, r)
				continue
			}
			parent++
			checkBlocks(t, tr.ID, r)
			if prev != nil {
				// A turn extends the previous turn's prompt and its ids.
				if r.In < prev.In+prev.Out {
					t.Errorf("%s: prompt %d after %d with answer %d: must grow by at least the answer", tr.ID, r.In, prev.In, prev.Out)
				}
				if !slices.Equal(r.HashIDs[:len(prev.HashIDs)], prev.HashIDs) {
					t.Errorf("%s: turn %d does not extend the previous turn's hash ids", tr.ID, parent)
				}
				if r.T <= prev.T || r.ThinkTime <= 0 {
					t.Errorf("%s: turn %d at %g after %g with think time %g", tr.ID, parent, r.T, prev.T, r.ThinkTime)
				}
				thinks = append(thinks, r.ThinkTime)
			}
			prev = r
		}
		// Sessions run tens of turns.
		if parent < 12 || parent > 60 {
			t.Errorf("%s: %d turns, want 12-60", tr.ID, parent)
		}
	}
	// Think times like Claude Code's: median about 10 s.
	slices.Sort(thinks)
	if med := thinks[len(thinks)/2]; med < 6 || med > 16 {
		t.Errorf("median think time %g s, want about 10", med)
	}
}

func checkBlocks(t *testing.T, id string, r *Request) {
	t.Helper()
	if want := (r.In + 63) / 64; len(r.HashIDs) != want {
		t.Errorf("%s: prompt of %d tokens has %d hash ids, want %d", id, r.In, len(r.HashIDs), want)
	}
}

// checkSubagent checks a subagent forks its parent's first prompt and then
// diverges, with child times relative to the spawn.
func checkSubagent(t *testing.T, tr Trace, s *Request) {
	t.Helper()
	first := tr.Requests[0]
	fork := first.In / 64
	for j, c := range s.Requests {
		checkBlocks(t, tr.ID, &c)
		if !slices.Equal(c.HashIDs[:fork], first.HashIDs[:fork]) {
			t.Errorf("%s %s: call %d does not start with the parent's first prompt", tr.ID, s.AgentID, j)
		}
		if len(c.HashIDs) > fork && slices.Contains(first.HashIDs, c.HashIDs[fork]) {
			t.Errorf("%s %s: call %d does not diverge after the fork", tr.ID, s.AgentID, j)
		}
		if j == 0 && c.T >= s.T {
			t.Errorf("%s %s: first child time %g not relative to the spawn at %g", tr.ID, s.AgentID, c.T, s.T)
		}
	}
	if len(s.Requests) == 0 || s.DurationMS <= 0 || s.AgentID == "" {
		t.Errorf("%s: empty subagent entry %+v", tr.ID, s)
	}
}

func TestSynthesizeOptions(t *testing.T) {
	cases := []struct {
		name         string
		o            SynthOptions
		heavy, light int
	}{
		// The default mix is half and half.
		{"default share", SynthOptions{Sessions: 10, Seed: 1}, 5, 5},
		// A share of 1: all heavy.
		{"all heavy", SynthOptions{Sessions: 6, Seed: 1, HeavyShare: 1}, 6, 0},
		// A negative share: light only.
		{"light only", SynthOptions{Sessions: 6, Seed: 1, HeavyShare: -1}, 0, 6},
		// A quarter heavy.
		{"a quarter heavy", SynthOptions{Sessions: 8, Seed: 1, HeavyShare: 0.25}, 2, 6},
		// No sessions.
		{"none", SynthOptions{}, 0, 0},
	}
	for _, c := range cases {
		var h, l int
		for _, tr := range Synthesize(c.o) {
			if strings.HasPrefix(tr.ID, "heavy-") {
				h++
			} else {
				l++
			}
		}
		if h != c.heavy || l != c.light {
			t.Errorf("%s: %d heavy and %d light, want %d and %d", c.name, h, l, c.heavy, c.light)
		}
	}
	// MaxThink caps think times.
	for _, tr := range Synthesize(SynthOptions{Sessions: 10, Seed: 2, MaxThink: 30}) {
		for _, tu := range tr.Turns() {
			if tu.ThinkTime > 30 {
				t.Fatalf("%s: think time %g over the cap of 30", tr.ID, tu.ThinkTime)
			}
		}
	}
}

func TestSynthesizeDeterministic(t *testing.T) {
	write := func(o SynthOptions) []byte {
		var b bytes.Buffer
		if err := WriteJSONL(&b, Synthesize(o)); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	a := write(SynthOptions{Sessions: 12, Seed: 3})
	if !bytes.Equal(a, write(SynthOptions{Sessions: 12, Seed: 3})) {
		t.Errorf("the same options gave different traces")
	}
	if bytes.Equal(a, write(SynthOptions{Sessions: 12, Seed: 4})) {
		t.Errorf("another seed gave the same traces")
	}
	// What Synthesize writes, Read reads back.
	back, err := Read(bytes.NewReader(a), "synth")
	if err != nil {
		t.Fatalf("reading synthesised traces: %v", err)
	}
	if len(back) != 12 {
		t.Errorf("read back %d traces, want 12", len(back))
	}
}
