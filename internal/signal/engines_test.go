package signal

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parseFile maps one testdata exposition with a mapping.
func parseFile(t *testing.T, file string, m Mapping) Sample {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := NewSample(0)
	if err := m.Parse(f, &s); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return s
}

// TestEngineMappings parses each engine's exposition text in its real format
// (SGLang's prometheus_client output with DP-rank scheduler series, an
// OpenTelemetry collector's Prometheus exporter output, and Modelplane's
// names) and checks the common names they give.
func TestEngineMappings(t *testing.T) {
	type want struct {
		counters map[string]float64
		gauges   map[string]float64
		counts   map[string]float64 // histogram counts
		absent   []string           // common names the exposition must not give
		p90      string             // histogram whose P90 is checked
		p90v     float64
		lo, hi   float64 // the P90's bucket
		parts    int     // parts in the sample
	}
	cases := []struct {
		name, file string
		m          Mapping
		w          want
	}{
		// SGLang: tokenizer counters carry only model_name; the scheduler's
		// gauges come per DP rank and are summed (token usage: the fuller rank);
		// prompt tokens double as prefix-cache queries, cached tokens as hits.
		{"sglang", "sglang_metrics.txt", SGLang(), want{
			counters: map[string]float64{PromptTokens: 2.5e6, PrefixCacheQueries: 2.5e6, PrefixCacheHits: 1.9e6, GenerationTokens: 120000,
				RequestsOK: 200, RequestsAborted: 5, Preemptions: 3},
			gauges: map[string]float64{Running: 16, Waiting: 4, KVCacheUsage: 0.83},
			counts: map[string]float64{TTFT: 200, ITL: 120000, E2E: 200, Queue: 200},
			absent: []string{TPOT, HTTP5xx},
			// rank 180 of 200 is the top of the (1, 2] bucket.
			p90: TTFT, p90v: 2, lo: 1, hi: 2, parts: 3,
		}},
		// gen_ai: outcomes from the request duration's count by error_type
		// (absent: ok; 429: 4xx; 500: 5xx; timeout: failed); tokens from
		// the token usage histogram's sums.
		{"gen_ai", "gen_ai_metrics.txt", GenAI(), want{
			counters: map[string]float64{RequestsOK: 100, HTTP4xx: 3, HTTP5xx: 2, RequestsFailed: 1, PromptTokens: 1.5e6, GenerationTokens: 40000},
			counts:   map[string]float64{TTFT: 100, TPOT: 100, E2E: 106},
			absent:   []string{ITL, Running},
			// rank 90 of 100 is the top of the (0.75, 1] bucket.
			p90: TTFT, p90v: 1, lo: 0.75, hi: 1, parts: 4,
		}},
		// Modelplane: TTFT and TPOT from the gateway's renamed gen_ai
		// histograms, the prefill engine's TTFT kept apart; outcomes by
		// error_type, where Envoy AI Gateway's _OTHER is a failed request;
		// prompt tokens and cache lookups off the engine not named decode,
		// output tokens off the one not named prefill; the fullest engine's
		// KV cache.
		{"modelplane", "modelplane_metrics.txt", Modelplane(), want{
			counters: map[string]float64{RequestsOK: 96, RequestsFailed: 4, HTTP4xx: 0, HTTP5xx: 0, PromptTokens: 1e6, GenerationTokens: 30000,
				PrefixCacheHits: 8e5, PrefixCacheQueries: 1e6, Preemptions: 1},
			gauges: map[string]float64{Running: 14, Waiting: 3, KVCacheUsage: 0.9},
			counts: map[string]float64{TTFT: 100, TPOT: 100, EngineTTFT: 100},
			absent: []string{ITL, RequestsActive, RequestsAborted, HTTP2xx},
			// rank 90 of 100: 80 at 1, 95 at 2.5, so 1 + 1.5*10/15.
			p90: TTFT, p90v: 2, lo: 1, hi: 2.5, parts: 5,
		}},
		// An independent vLLM stand-in labels finish_reason: the second
		// spelling's rules read it (tool_calls is a normal finish,
		// remote_decode counts nowhere), and the absent abort series reads 0.
		{"vllm finish_reason", "vllm_finish_reason_metrics.txt", VLLM(), want{
			counters: map[string]float64{RequestsOK: 50, RequestsAborted: 0, PromptTokens: 412000},
			counts:   map[string]float64{TTFT: 50, ITL: 3000},
			absent:   []string{TPOT, HTTP5xx},
			// rank 45 of 50 is the top of the (1, 2.5] bucket.
			p90: TTFT, p90v: 2.5, lo: 1, hi: 2.5, parts: 1,
		}},
		// vLLM's two data-parallel engines are two parts, plus the HTTP
		// counters' one series group.
		{"vllm", "vllm_metrics.txt", VLLM(), want{
			counters: map[string]float64{RequestsOK: 159, HTTP4xx: 7},
			counts:   map[string]float64{TTFT: 165},
			p90:      TTFT, p90v: 2.35, lo: 1, hi: 2.5, parts: 3,
		}},
	}
	for _, c := range cases {
		s := parseFile(t, c.file, c.m)
		for name, v := range c.w.counters {
			if got, ok := s.Counter[name]; !ok || math.Abs(got-v) > 1e-9 {
				t.Errorf("%s: counter %s = %g (present %v), want %g", c.name, name, got, ok, v)
			}
		}
		for name, v := range c.w.gauges {
			if got, ok := s.Gauge[name]; !ok || math.Abs(got-v) > 1e-9 {
				t.Errorf("%s: gauge %s = %g (present %v), want %g", c.name, name, got, ok, v)
			}
		}
		for name, v := range c.w.counts {
			if got := s.Hist[name].Count; got != v {
				t.Errorf("%s: histogram %s count %g, want %g", c.name, name, got, v)
			}
		}
		for _, name := range c.w.absent {
			_, h := s.Hist[name]
			_, k := s.Counter[name]
			_, g := s.Gauge[name]
			if h || k || g {
				t.Errorf("%s: %s present, want absent", c.name, name)
			}
		}
		v, lo, hi, ok := s.Hist[c.w.p90].Quantile(0.9)
		if !ok || math.Abs(v-c.w.p90v) > 1e-9 || lo != c.w.lo || hi != c.w.hi {
			t.Errorf("%s: P90 %s = %g in [%g, %g] (ok %v), want %g in [%g, %g]", c.name, c.w.p90, v, lo, hi, ok, c.w.p90v, c.w.lo, c.w.hi)
		}
		if len(s.Parts) != c.w.parts {
			t.Errorf("%s: %d parts, want %d: %v", c.name, len(s.Parts), c.w.parts, keys(s.Parts))
		}
		// The parts add up to the sums.
		for name, sum := range s.Counter {
			total := 0.0
			for _, p := range s.Parts {
				total += p.Counter[name]
			}
			if math.Abs(total-sum) > 1e-6*math.Max(1, sum) {
				t.Errorf("%s: parts of %s add up to %g, the sum is %g", c.name, name, total, sum)
			}
		}
	}
}

func keys[V any](m map[string]V) []string { return sortedKeys(m) }

func TestMappingByName(t *testing.T) {
	for _, name := range MappingNames() {
		m, err := MappingByName(name)
		if err != nil || len(m) == 0 {
			t.Errorf("MappingByName(%q) = %d rules, %v", name, len(m), err)
		}
		for i, r := range m {
			if err := r.Check(); err != nil {
				t.Errorf("%s rule %d: %v", name, i, err)
			}
		}
	}
	_, err := MappingByName("tgi")
	if err == nil || !strings.Contains(err.Error(), "vllm, sglang") && !strings.Contains(err.Error(), "gen_ai, modelplane, sglang, vllm") {
		t.Errorf("unknown mapping: error %v, want one listing the known names", err)
	}
}

func TestLoadMapping(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string // what the case shows
		yaml    string
		wantErr []string // substrings of the error; nil for none
		check   func(Mapping) bool
	}{
		// a rule for ttft_seconds replaces vLLM's, with ms converted to s;
		// the other common names keep vLLM's rules.
		{"override", `
- common: ttft_seconds
  metric: my_ttft_milliseconds
  kind: histogram
  scale: 0.001
`, nil, func(m Mapping) bool {
			n := 0
			for _, r := range m {
				if r.Common == TTFT {
					n++
					if r.Metric != "my_ttft_milliseconds" || r.Scale != 0.001 {
						return false
					}
				}
			}
			return n == 1 && len(m) == len(VLLM())
		}},
		// a common name vLLM has no rule for is added.
		{"add", `
- {common: requests_active, metric: gw_open_requests, kind: gauge}
`, nil, func(m Mapping) bool { return len(m) == len(VLLM())+1 && m[len(m)-1].Common == RequestsActive }},
		// errors name the file, the rule and the field.
		{"unknown common", `
- {common: ttft_seconds, metric: a, kind: histogram}
- {common: ttft, metric: b, kind: histogram}
`, []string{"bad.yaml", "rule 1", "common", "ttft_seconds"}, nil},
		{"kind mismatch", `
- {common: http_5xx, metric: errors_total, kind: gauge}
`, []string{"rule 0", "kind", "http_5xx is a counter"}, nil},
		{"bad regexp", `
- {common: http_5xx, metric: errors_total, kind: counter, match: {code: "5(("}}
`, []string{"rule 0", "match", "code"}, nil},
		{"bad metric name", `
- {common: http_5xx, metric: "errors-total", kind: counter}
`, []string{"rule 0", "metric"}, nil},
		{"unknown field", `
- {common: http_5xx, metrc: errors_total, kind: counter}
`, []string{"bad.yaml", "metrc"}, nil},
		{"empty", `[]`, []string{"no rules"}, nil},
	}
	for _, c := range cases {
		file := "good.yaml"
		if c.wantErr != nil {
			file = "bad.yaml"
		}
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := LoadMapping(path, VLLM())
		if c.wantErr == nil {
			if err != nil || !c.check(m) {
				t.Errorf("%s: %v, mapping %+v", c.name, err, m)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
	}
	if _, err := LoadMapping(filepath.Join(dir, "missing.yaml"), nil); err == nil {
		t.Error("a missing file loaded without error")
	}
}

// TestSameInteractivityQuantity: every built-in mapping judges
// interactivity on a per-request time per output token. A mapping that has
// only per-token latency (SGLang) says, on that rule, how the per-request
// figure is derived; SGLang's old per-chunk running mean is not read as
// per-request TPOT.
func TestSameInteractivityQuantity(t *testing.T) {
	perRequest := map[string]string{
		"vllm":       "vllm:request_time_per_output_token_seconds",
		"modelplane": "modelplane_frontend_tpot_seconds",
		"gen_ai":     "gen_ai_server_time_per_output_token_seconds",
	}
	for _, name := range MappingNames() {
		m, err := MappingByName(name)
		if err != nil {
			t.Fatal(err)
		}
		var tpot []string
		for _, r := range m {
			if r.Common == TPOT {
				tpot = append(tpot, r.Metric)
			}
			if r.Common == ITL && len(tpot) == 0 && perRequest[name] == "" && !strings.Contains(r.Note, DerivedTPOT) {
				t.Errorf("%s: %s is per token and its rule does not say how the per-request figure is derived", name, r.Metric)
			}
		}
		switch want := perRequest[name]; {
		case want != "" && (len(tpot) != 1 || tpot[0] != want):
			t.Errorf("%s: tpot_seconds from %q, want %s", name, tpot, want)
		case want == "" && len(tpot) != 0:
			t.Errorf("%s: tpot_seconds from %q, a series that is not per request", name, tpot)
		}
	}
	notes := SGLang().Notes()
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "itl_seconds <- sglang:inter_token_latency_seconds: per token") {
		t.Errorf("SGLang notes %q, want the derivation on its inter-token latency rule", notes)
	}
}
