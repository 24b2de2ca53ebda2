package trace

import (
	"os"
	"path/filepath"
	"testing"
)

// sharedCorpus is the real trace corpus shared across the project's checkouts.
var sharedCorpus = filepath.Join("..", "..", "..", "shared", "traces", "weka-claude-code.jsonl.gz")

// readSharedCorpus reads the shared corpus, or skips the test when it is
// absent (fails it under HEADROOM_REQUIRE_SHARED=1).
func readSharedCorpus(t *testing.T) []Trace {
	t.Helper()
	if _, err := os.Stat(sharedCorpus); err != nil {
		if os.Getenv("HEADROOM_REQUIRE_SHARED") == "1" {
			t.Fatalf("shared corpus %s is missing and HEADROOM_REQUIRE_SHARED=1: %v", sharedCorpus, err)
		}
		t.Skipf("shared corpus %s is absent (%v); set HEADROOM_REQUIRE_SHARED=1 to make this a failure", sharedCorpus, err)
	}
	traces, err := ReadPath(sharedCorpus)
	if err != nil {
		t.Fatal(err)
	}
	return traces
}

// TestSharedCorpus reads the 474 real Claude Code traces and checks their
// statistics are sane. It skips when the corpus is absent, unless
// HEADROOM_REQUIRE_SHARED=1.
func TestSharedCorpus(t *testing.T) {
	traces := readSharedCorpus(t)
	if len(traces) != 474 {
		t.Fatalf("read %d traces from %s, want 474", len(traces), sharedCorpus)
	}
	all := Describe("all", traces)
	heavy, light := Tiers(traces)
	hs, ls := Describe("heavy", heavy), Describe("light", light)
	for _, s := range []TierStats{all, hs, ls} {
		t.Logf("%-5s traces %3d requests %5d median prompt %6d p90 %6d over128K %5.1f%% median answer %4d with subagents %4.1f%%",
			s.Name, s.Traces, s.Requests, s.MedianPrompt, s.P90Prompt, 100*s.Over128K, s.MedianAnswer, 100*s.WithSubagents)
	}
	// Sanity bounds, loose: real Claude Code prompts are tens to hundreds of
	// thousands of tokens, answers hundreds.
	checks := []struct {
		what string
		ok   bool
	}{
		{"all model calls counted (34,150, 398 of them subagent calls)", all.Requests == 34150},
		{"tiers are quarters", hs.Traces == 474/4 && ls.Traces == 474/4},
		{"heavy prompts longer than light", hs.MedianPrompt > ls.MedianPrompt && hs.P90Prompt > ls.P90Prompt},
		{"median prompt between 10K and 300K", all.MedianPrompt > 10000 && all.MedianPrompt < 300000},
		{"p90 at or above the median", all.P90Prompt >= all.MedianPrompt},
		{"median answer between 10 and 5000", all.MedianAnswer > 10 && all.MedianAnswer < 5000},
		{"shares are fractions", all.Over128K >= 0 && all.Over128K <= 1 && all.WithSubagents > 0 && all.WithSubagents < 0.1},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: failed; stats %+v heavy %+v light %+v", c.what, all, hs, ls)
		}
	}
	// Every trace flattens into as many turns as it has model calls.
	for _, tr := range traces[:20] {
		n := 0
		eachCall(tr.Requests, func(*Request) { n++ })
		turns := tr.Turns()
		if len(turns) != n {
			t.Errorf("trace %q: %d turns, want %d", tr.ID, len(turns), n)
		}
		for i := 1; i < len(turns); i++ {
			if turns[i].Start < turns[i-1].Start {
				t.Errorf("trace %q: turn %d starts before turn %d", tr.ID, i, i-1)
				break
			}
		}
	}
}
