package signal

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/stats"
)

// partsSample builds a sample at second sec with one counter (prompt_tokens)
// and one histogram (ttft, buckets 1s and +Inf, all observations under 1s)
// per part, as a Scraper of several copies gives it. A negative value leaves
// the part out, as when its target failed the scrape.
func partsSample(sec int, errs []string, values map[string]float64) Sample {
	s := NewSample(time.Duration(sec) * time.Second)
	upper := []float64{1, math.Inf(1)}
	for part, v := range values {
		if v < 0 {
			continue
		}
		s.addCounter(part, PromptTokens, v)
		if err := s.addHist(part, TTFT, stats.Histogram{Upper: upper, Cumulative: []float64{v, v}, Count: v}); err != nil {
			panic(err)
		}
	}
	s.Errors = errs
	return s
}

// TestWindowsPerPart shows what keeping per-copy values buys: a restart of
// one copy hidden in the sum, a copy missing one scrape, and a series created
// on first use.
func TestWindowsPerPart(t *testing.T) {
	failed := []string{"http://b/metrics: connection refused"}
	cases := []struct {
		name    string // what the case shows
		samples []Sample
		want    []float64 // prompt_tokens (and ttft count) per 10s window
		warn    []string  // substrings some warning must hold
		noWarn  string    // no warning may hold this
	}{
		// copy a restarts (100 -> 10) while b grows by 200: the sum grows
		// (200 -> 310) and hides it; per copy the delta is 10 + 200.
		{"restart hidden in the sum", []Sample{
			partsSample(0, nil, map[string]float64{"a": 100, "b": 100}),
			partsSample(10, nil, map[string]float64{"a": 10, "b": 300}),
			partsSample(20, nil, map[string]float64{"a": 30, "b": 350}),
		}, []float64{210, 70}, []string{"in a: went down between 0s and 10s (engine restart?)"}, "in b"},
		// copy b fails the scrape at 10s: its series are absent there, not
		// reset; its edge at 10s is taken from the scrape at 0s (the tie goes
		// to the earlier), so the two windows add up to the whole growth.
		{"one copy missed a scrape", []Sample{
			partsSample(0, nil, map[string]float64{"a": 100, "b": 100}),
			partsSample(10, failed, map[string]float64{"a": 150, "b": -1}),
			partsSample(20, nil, map[string]float64{"a": 200, "b": 220}),
		}, []float64{50, 170}, []string{"in b: missing from the scrape at 10s: used the one at 0s"}, "went down"},
		// a series created on first use (copy c's first 5 tokens) counts in
		// full, in the window where it appeared.
		{"series created on first use", []Sample{
			partsSample(0, nil, map[string]float64{"a": 100}),
			partsSample(10, nil, map[string]float64{"a": 110, "c": 5}),
			partsSample(20, nil, map[string]float64{"a": 120, "c": 8}),
		}, []float64{15, 13}, nil, "went down"},
		// a copy first seen right after a failed scrape may be an old one
		// coming back: its earlier growth is not counted, with a warning.
		{"first seen after a failed scrape", []Sample{
			partsSample(0, failed, map[string]float64{"a": 100}),
			partsSample(10, nil, map[string]float64{"a": 110, "b": 5000}),
			partsSample(20, nil, map[string]float64{"a": 120, "b": 5003}),
		}, []float64{10, 13}, []string{"in b: first seen at 10s, right after a scrape that missed targets"}, ""},
	}
	for _, c := range cases {
		ws := Windows(c.samples, 0, 20*time.Second, 10*time.Second)
		if len(ws) != len(c.want) {
			t.Fatalf("%s: %d windows, want %d", c.name, len(ws), len(c.want))
		}
		var all []string
		for i, w := range ws {
			if got := w.Counter[PromptTokens]; got != c.want[i] {
				t.Errorf("%s: window %d prompt_tokens %g, want %g", c.name, i, got, c.want[i])
			}
			if got := w.Hist[TTFT].Count; got != c.want[i] {
				t.Errorf("%s: window %d ttft count %g, want %g", c.name, i, got, c.want[i])
			}
			if got := w.Hist[TTFT].Cumulative[0]; got != c.want[i] {
				t.Errorf("%s: window %d ttft bucket le=1 %g, want %g", c.name, i, got, c.want[i])
			}
			all = append(all, w.Warnings...)
		}
		joined := strings.Join(all, "\n")
		for _, w := range c.warn {
			if !strings.Contains(joined, w) {
				t.Errorf("%s: no warning holds %q: %q", c.name, w, all)
			}
		}
		if c.noWarn != "" && strings.Contains(joined, c.noWarn) {
			t.Errorf("%s: a warning holds %q: %q", c.name, c.noWarn, all)
		}
	}
}

// TestSampleJSON checks that a sample of two vLLM servers (two engines each)
// survives JSON with its parts, and logs its size: metrics.jsonl holds one
// such line per scrape.
func TestSampleJSON(t *testing.T) {
	body := readTestdata(t)
	s := NewSample(5 * time.Second)
	for _, target := range []string{"http://10.0.0.1:8000/metrics", "http://10.0.0.2:8000/metrics"} {
		part := NewSample(s.At)
		if err := VLLM().parse(strings.NewReader(string(body)), target, &part); err != nil {
			t.Fatal(err)
		}
		if err := s.Merge(part); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Sample
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Parts) != 6 || back.Counter[RequestsOK] != 318 {
		t.Errorf("round trip: %d parts, requests_ok %g; want 6 parts and 318", len(back.Parts), back.Counter[RequestsOK])
	}
	later := back
	back.At, later.At = 0, 10*time.Second
	ws := Windows([]Sample{back, later}, 0, 10*time.Second, 10*time.Second)
	if ws[0].Counter[RequestsOK] != 0 || len(ws[0].Warnings) != 0 {
		t.Errorf("window between two identical samples: %v, warnings %q", ws[0].Counter, ws[0].Warnings)
	}
	sums := back
	sums.Parts = nil
	nb, _ := json.Marshal(sums)
	t.Logf("one sample of 2 targets x 2 engines: %d bytes of JSON (%d parts), %d without parts", len(b), len(back.Parts), len(nb))
}
