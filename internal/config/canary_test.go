package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCanarySection checks the canary section: a valid one gets its
// defaults, and each bad field is named.
func TestCanarySection(t *testing.T) {
	// a live candidate: the canary splits live traffic between served recipes
	live := `version: 1
recipe: {name: cand, nodes: 1, gpus_per_node: 1, endpoint: "http://10.0.0.2:8000", model: m, metrics: ["http://10.0.0.2:8000/metrics"]}
bar: {ttft_p90_s: 5, interactivity_p90_tps: 10, error_rate: 0.02}
sweep: {ladder: [5], step_s: 300, window_s: 60, scrape_s: 5}
`
	ok := "canary:\n  baseline: {endpoint: \"http://10.0.0.1:8000\", metrics: [\"http://10.0.0.1:8000/metrics\"]}\n  shares: [0.01, 0.05, 0.2]\n  hold_s: 600\n"
	r, err := Parse([]byte(live+ok), "canary.yaml")
	if err != nil {
		t.Fatalf("valid canary: %v", err)
	}
	c := r.Canary
	if c.Listen != "127.0.0.1:8001" || c.SessionPrefixBytes != 256 || c.IdleS != 1800 || c.NoWorse.Tolerance != 0.1 || c.NoWorse.ErrorPoints != 0.01 || c.Promote != CanaryPromoteNever {
		t.Errorf("defaults not filled: %+v", *c)
	}
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"no baseline", strings.Replace(ok, "  baseline: {endpoint: \"http://10.0.0.1:8000\", metrics: [\"http://10.0.0.1:8000/metrics\"]}\n", "", 1), []string{"canary.baseline.endpoint", "canary.baseline.metrics"}},
		{"falling shares", strings.Replace(ok, "[0.01, 0.05, 0.2]", "[0.2, 0.05]", 1), []string{"canary.shares[1]", "above the step before"}},
		{"share past 1", strings.Replace(ok, "[0.01, 0.05, 0.2]", "[1.5]", 1), []string{"canary.shares[0]", "(0, 1]"}},
		{"short hold", strings.Replace(ok, "hold_s: 600", "hold_s: 100", 1), []string{"canary.hold_s", "3 windows"}},
		{"max hold under hold", ok + "  max_hold_s: 300\n", []string{"canary.max_hold_s"}},
		{"promote without kubernetes", ok + "  promote: on_ready\n", []string{"canary.promote", "kubernetes"}},
		{"promote typo", ok + "  promote: always\n", []string{"canary.promote", "never or on_ready"}},
		{"bad listen", ok + "  listen: nowhere\n", []string{"canary.listen"}},
		{"unknown field", ok + "  weight: 3\n", []string{"weight"}},
		// the split: proxy or httproute, and a route needs its names
		{"split typo", ok + "  split: {type: gateway}\n", []string{"canary.split.type", "proxy", "httproute"}},
		{"httproute without route", ok + "  split: {type: httproute}\n", []string{"canary.split.httproute", "namespace"}},
		{"httproute missing names", ok + "  split: {type: httproute, httproute: {rule: -1}}\n", []string{"canary.split.httproute.namespace", "canary.split.httproute.name:", "canary.split.httproute.rule", "canary.split.httproute.baseline", "canary.split.httproute.candidate"}},
		{"httproute same backend", ok + "  split: {type: httproute, httproute: {namespace: llm, name: chat, baseline: today, candidate: today}}\n", []string{"canary.split.httproute.candidate", "same backendRef"}},
		{"httproute with proxy", ok + "  split: {httproute: {namespace: llm, name: chat, baseline: today, candidate: cand}}\n", []string{"canary.split.httproute", "type: httproute"}},
		{"httproute share too fine", strings.Replace(ok, "[0.01, 0.05, 0.2]", "[0.0004, 0.05]", 1) + "  split: {type: httproute, httproute: {namespace: llm, name: chat, baseline: today, candidate: cand}}\n", []string{"canary.shares[0]", "out of 1000"}},
		{"httproute unknown field", ok + "  split: {type: httproute, httproute: {namespace: llm, name: chat, baseline: today, candidate: cand, weight: 3}}\n", []string{"weight"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(live+tc.yaml), "canary.yaml")
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if c.Split.Type != CanarySplitProxy || c.Split.HTTPRoute != nil {
		t.Errorf("split %+v, want the proxy by default", c.Split)
	}
	// an HTTPRoute split, its rule defaulting to the first
	r, err = Parse([]byte(live+ok+"  split: {type: httproute, httproute: {namespace: llm, name: chat, baseline: vllm-today, candidate: vllm-cand}}\n"), "canary.yaml")
	if err != nil {
		t.Fatalf("httproute split: %v", err)
	}
	if h := r.Canary.Split.HTTPRoute; r.Canary.Split.Type != CanarySplitHTTPRoute || h == nil || h.Namespace != "llm" || h.Name != "chat" || h.Rule != 0 || h.Baseline != "vllm-today" || h.Candidate != "vllm-cand" {
		t.Errorf("httproute split read as %+v", r.Canary.Split)
	}
	// the built-in simulator is no live recipe to canary
	if _, err := Parse(append(defaultYAML, []byte(ok)...), "sim.yaml"); err == nil || !strings.Contains(err.Error(), "canary.baseline") {
		t.Errorf("canary of the simulator: %v, want it refused", err)
	}
}

// TestCanaryDocExampleParses keeps docs/canary.md's run file valid.
func TestCanaryDocExampleParses(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "canary.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/canary.md has no yaml block")
	}
	r, err := Parse([]byte(block), "docs/canary.md")
	if err != nil {
		t.Fatalf("docs/canary.md's run file: %v", err)
	}
	if r.Canary == nil || len(r.Canary.Shares) != 3 {
		t.Fatalf("docs/canary.md's run file has canary %+v", r.Canary)
	}
}
