package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"testing"
)

// TestSynthReproducesThePublishedTiers runs `traces synth` and then
// `traces stats --json` on its output, as a user would, and checks every
// figure of the published AgentX tier table within 10%.
func TestSynthReproducesThePublishedTiers(t *testing.T) {
	out := filepath.Join(t.TempDir(), "synth.jsonl")
	var buf bytes.Buffer
	if err := run(context.Background(), []string{"traces", "synth", "--sessions", "400", "--seed", "1", "-o", out}, &buf, &buf); err != nil {
		t.Fatalf("synth: %v\n%s", err, buf.String())
	}
	buf.Reset()
	if err := run(context.Background(), []string{"traces", "stats", "--json", out}, &buf, &buf); err != nil {
		t.Fatalf("stats: %v", err)
	}
	var got struct {
		Tiers []struct {
			Name          string  `json:"name"`
			MedianPrompt  float64 `json:"median_prompt"`
			P90Prompt     float64 `json:"p90_prompt"`
			Over128K      float64 `json:"over_128k"`
			MedianAnswer  float64 `json:"median_answer"`
			WithSubagents float64 `json:"with_subagents"`
		} `json:"tiers"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, buf.String())
	}
	published := map[string][5]float64{ // median prompt, p90 prompt, over 128K, median answer, with subagents
		"heavy": {149e3, 209e3, 0.64, 461, 0.09},
		"light": {47e3, 98e3, 0.05, 274, 0.47},
	}
	seen := 0
	for _, tier := range got.Tiers {
		want, ok := published[tier.Name]
		if !ok {
			continue
		}
		seen++
		have := [5]float64{tier.MedianPrompt, tier.P90Prompt, tier.Over128K, tier.MedianAnswer, tier.WithSubagents}
		names := [5]string{"median prompt", "p90 prompt", "over 128K", "median answer", "with subagents"}
		for i := range want {
			if math.Abs(have[i]-want[i]) > 0.10*want[i] {
				t.Errorf("%s %s = %g, published %g (more than 10%% off)", tier.Name, names[i], have[i], want[i])
			}
		}
	}
	if seen != 2 {
		t.Errorf("stats printed %d of the heavy and light tiers", seen)
	}
}
