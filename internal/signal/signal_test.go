package signal

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/stats"
)

func readTestdata(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/vllm_metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseVLLM parses vLLM v1 exposition text with two engine copies
// (engine="0" and "1") and checks the sums under common names.
func TestParseVLLM(t *testing.T) {
	s := NewSample(0)
	if err := VLLM().Parse(strings.NewReader(string(readTestdata(t))), &s); err != nil {
		t.Fatal(err)
	}
	counters := []struct {
		name string
		want float64
		why  string
	}{
		{RequestsOK, 159, "stop+length of both engines"},
		{RequestsAborted, 6, "abort of both engines"},
		{HTTP2xx, 158, "only the chat handler, not /metrics or /v1/models"},
		{HTTP4xx, 7, "refusals"},
		{HTTP5xx, 0, "family exposed, no 5xx series yet: zero, not missing"},
		{PromptTokens, 1.9e6, "summed over engines"},
		{GenerationTokens, 80000, "summed over engines"},
		{PrefixCacheHits, 1.2e6, "summed over engines"},
		{PrefixCacheQueries, 1.6e6, "summed over engines"},
		{Preemptions, 4, "summed over engines"},
	}
	for _, c := range counters {
		got, ok := s.Counter[c.name]
		if !ok || got != c.want {
			t.Errorf("counter %s = %g (present %v), want %g: %s", c.name, got, ok, c.want, c.why)
		}
	}
	gauges := []struct {
		name string
		want float64
		why  string
	}{
		{Running, 12, "summed"},
		{Waiting, 2, "summed"},
		{KVCacheUsage, 0.5, "the fullest copy, a fraction is not summed"},
	}
	for _, c := range gauges {
		if got := s.Gauge[c.name]; got != c.want {
			t.Errorf("gauge %s = %g, want %g: %s", c.name, got, c.want, c.why)
		}
	}
	hists := []struct {
		name       string
		count, sum float64
	}{
		{TTFT, 165, 200.75}, {TPOT, 165, 9.25}, {ITL, 80000, 3900}, {E2E, 165, 1500}, {Queue, 165, 20},
	}
	for _, c := range hists {
		h, ok := s.Hist[c.name]
		if !ok || h.Count != c.count || h.Sum != c.sum || h.Cumulative[len(h.Cumulative)-1] != c.count || !math.IsInf(h.Upper[len(h.Upper)-1], 1) {
			t.Errorf("histogram %s: count %g sum %g (present %v), want %g and %g with a +Inf bucket", c.name, h.Count, h.Sum, ok, c.count, c.sum)
		}
	}
	// P90 TTFT: rank 148.5 of 165; 135 at le=1.0 and 150 at le=2.5.
	if v, lo, hi, _ := s.Hist[TTFT].Quantile(0.9); lo != 1 || hi != 2.5 || math.Abs(v-2.35) > 1e-9 {
		t.Errorf("P90 TTFT = %g in [%g, %g], want 2.35 in [1, 2.5]", v, lo, hi)
	}
}

func TestParseRules(t *testing.T) {
	text := `# HELP engine_ttft_ms Time to first token.
# TYPE engine_ttft_ms histogram
engine_ttft_ms_bucket{le="100"} 3
engine_ttft_ms_bucket{le="1000"} 5
engine_ttft_ms_bucket{le="+Inf"} 6
engine_ttft_ms_count 6
engine_ttft_ms_sum 4200
# TYPE cache_usage_percent gauge
cache_usage_percent 40
requests_untyped_total{code="500"} 3
`
	cases := []struct {
		name    string // what the case shows
		rule    Rule
		check   func(Sample) bool
		wantErr bool
	}{
		// Scale converts ms bounds and sum to seconds, leaving counts alone.
		{"ms to s", Rule{Common: TTFT, Metric: "engine_ttft_ms", Kind: Histogram, Scale: 0.001},
			func(s Sample) bool {
				h := s.Hist[TTFT]
				return h.Upper[0] == 0.1 && h.Upper[1] == 1 && h.Sum == 4.2 && h.Count == 6
			}, false},
		// a percent gauge scaled to a fraction.
		{"percent to fraction", Rule{Common: KVCacheUsage, Metric: "cache_usage_percent", Kind: Gauge, Scale: 0.01},
			func(s Sample) bool { return s.Gauge[KVCacheUsage] == 0.4 }, false},
		// a series with no TYPE line is untyped and still read as a counter.
		{"untyped counter", Rule{Common: HTTP5xx, Metric: "requests_untyped_total", Match: map[string]string{"code": "500|503"}, Kind: Counter},
			func(s Sample) bool { return s.Counter[HTTP5xx] == 3 }, false},
		// a histogram rule on a gauge family is a mapping mistake, reported.
		{"wrong kind", Rule{Common: TTFT, Metric: "cache_usage_percent", Kind: Histogram},
			func(s Sample) bool { _, ok := s.Hist[TTFT]; return !ok }, true},
		// a family the engine does not expose stays absent.
		{"absent family", Rule{Common: Preemptions, Metric: "no_such_total", Kind: Counter},
			func(s Sample) bool { _, ok := s.Counter[Preemptions]; return !ok }, false},
	}
	for _, c := range cases {
		s := NewSample(0)
		err := Mapping{c.rule}.Parse(strings.NewReader(text), &s)
		if (err != nil) != c.wantErr || !c.check(s) {
			t.Errorf("%s: err %v (want error %v), sample %+v", c.name, err, c.wantErr, s)
		}
	}
	s := NewSample(0)
	if err := VLLM().Parse(strings.NewReader("vllm:num_requests_running{engine=\"0\" 3\n"), &s); err == nil {
		t.Error("malformed exposition parsed without error")
	}
}

// TestScraper scrapes two vLLM servers, one failing server and one address
// nobody listens on, over real HTTP.
func TestScraper(t *testing.T) {
	body := readTestdata(t)
	ok := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(body)
	}
	a := httptest.NewServer(http.HandlerFunc(ok))
	defer a.Close()
	b := httptest.NewServer(http.HandlerFunc(ok))
	defer b.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "engine is starting", http.StatusServiceUnavailable)
	}))
	defer broken.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sc := &Scraper{Targets: []string{a.URL + "/metrics", b.URL + "/metrics", broken.URL + "/metrics", gone.URL + "/metrics"}, Mapping: VLLM()}
	s, err := sc.Scrape(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s.At != 30*time.Second || s.Counter[RequestsOK] != 2*159 || s.Hist[TTFT].Count != 2*165 {
		t.Errorf("scrape of two copies: at %v, requests_ok %g, ttft count %g; want 30s, 318, 330", s.At, s.Counter[RequestsOK], s.Hist[TTFT].Count)
	}
	if len(s.Errors) != 2 || !strings.Contains(strings.Join(s.Errors, " "), "503") {
		t.Errorf("errors = %q, want the 503 target and the closed one", s.Errors)
	}
	sc.Targets = []string{broken.URL, gone.URL}
	if _, err := sc.Scrape(ctx, 0); err == nil {
		t.Error("scrape where no target answered returned no error")
	}
}

// sample builds a scrape at second sec with a ttft histogram (1s and +Inf
// buckets), a counter and a gauge.
func sample(sec int, ttftBelow1, ttftTotal, tokens, running float64) Sample {
	s := NewSample(time.Duration(sec) * time.Second)
	s.Hist[TTFT] = stats.Histogram{Upper: []float64{1, math.Inf(1)}, Cumulative: []float64{ttftBelow1, ttftTotal}, Count: ttftTotal}
	s.Counter[PromptTokens] = tokens
	s.Gauge[Running] = running
	return s
}

func TestWindows(t *testing.T) {
	steady := []Sample{
		sample(0, 0, 0, 100, 1), sample(10, 5, 10, 200, 2), sample(20, 10, 20, 300, 3),
		sample(30, 15, 30, 400, 4), sample(40, 20, 40, 500, 5),
	}
	restart := slices.Clone(steady)
	restart[3] = sample(30, 1, 2, 40, 4) // the engine restarted between 20s and 30s
	noCounter := slices.Clone(steady)
	noCounter[2] = sample(20, 10, 20, 300, 3)
	delete(noCounter[2].Counter, PromptTokens)
	jittered := []Sample{sample(1, 0, 0, 100, 1), sample(9, 5, 10, 200, 2), sample(22, 10, 20, 300, 3)}

	cases := []struct {
		name          string // what the case shows
		samples       []Sample
		start, end, w time.Duration
		wantEdges     []time.Duration   // window starts, then the last end
		wantTokens    []float64         // prompt_tokens delta per window; -1 = absent
		wantTTFT      []float64         // ttft count delta per window
		warnings      []int             // warnings per window
		warnContains  string            // some warning must contain this
		gauge         map[int]GaugeStat // gauge stats of running, per window index
	}{
		// plain deltas between the samples at the edges; gauges from samples inside.
		{"steady", steady, 0, 40 * time.Second, 20 * time.Second,
			[]time.Duration{0, 20 * time.Second, 40 * time.Second}, []float64{200, 200}, []float64{20, 20}, []int{0, 0}, "",
			map[int]GaugeStat{0: {Mean: 1.5, Max: 2, Last: 2, N: 2}, 1: {Mean: 4, Max: 5, Last: 5, N: 3}}},
		// with width 18s the last 4s (under half a width) merge into the
		// window before; the middle edge is the scrape read for it, at 20s.
		{"short tail merged", steady, 0, 40 * time.Second, 18 * time.Second,
			[]time.Duration{0, 20 * time.Second, 40 * time.Second}, []float64{200, 200}, []float64{20, 20}, []int{0, 0}, "", nil},
		// a counter that goes down is a restart: the later value is the delta, with a warning.
		{"restart", restart, 0, 40 * time.Second, 10 * time.Second,
			[]time.Duration{0, 10 * time.Second, 20 * time.Second, 30 * time.Second, 40 * time.Second},
			[]float64{100, 100, 40, 460}, []float64{10, 10, 2, 38}, []int{0, 0, 1, 0}, "prompt_tokens, ttft_seconds went down between 20s and 30s (engine restart?): delta taken from zero", nil},
		// a family missing from the sample at an edge (a failed scrape) takes
		// that edge from the nearest sample holding it, ties to the earlier:
		// both windows use 10s, so 100+300 is the whole growth, once.
		{"absent at an edge", noCounter, 0, 40 * time.Second, 20 * time.Second,
			[]time.Duration{0, 20 * time.Second, 40 * time.Second}, []float64{100, 300}, []float64{20, 20}, []int{1, 1}, "prompt_tokens missing from the scrape at 20s: used the one at 10s", nil},
		// edges use the closest sample even when scrapes are not on the
		// edge, and the windows span those samples' times.
		{"closest sample", jittered, 0, 20 * time.Second, 10 * time.Second,
			[]time.Duration{1 * time.Second, 9 * time.Second, 22 * time.Second}, []float64{100, 100}, []float64{10, 10}, []int{0, 0}, "", nil},
		// windows narrower than the scrape interval get the same sample at both edges: no deltas, a warning.
		{"scrapes too sparse", steady, 0, 4 * time.Second, 2 * time.Second,
			[]time.Duration{0, 2 * time.Second, 4 * time.Second}, []float64{-1, -1}, []float64{-1, -1}, []int{2, 3}, "same scrape at both edges", nil},
	}
	for _, c := range cases {
		ws := Windows(c.samples, c.start, c.end, c.w)
		var edges []time.Duration
		for _, w := range ws {
			edges = append(edges, w.Start)
		}
		if len(ws) > 0 {
			edges = append(edges, ws[len(ws)-1].End)
		}
		if !slices.Equal(edges, c.wantEdges) {
			t.Errorf("%s: edges %v, want %v", c.name, edges, c.wantEdges)
			continue
		}
		var all []string
		for i, w := range ws {
			tok, ok := w.Counter[PromptTokens]
			if !ok {
				tok = -1
			}
			if tok != c.wantTokens[i] {
				t.Errorf("%s: window %d prompt_tokens %g, want %g", c.name, i, tok, c.wantTokens[i])
			}
			tt := -1.0
			if h, ok := w.Hist[TTFT]; ok {
				tt = h.Count
			}
			if tt != c.wantTTFT[i] {
				t.Errorf("%s: window %d ttft count %g, want %g", c.name, i, tt, c.wantTTFT[i])
			}
			if len(w.Warnings) != c.warnings[i] {
				t.Errorf("%s: window %d warnings %q, want %d", c.name, i, w.Warnings, c.warnings[i])
			}
			if g, ok := c.gauge[i]; ok && w.Gauge[Running] != g {
				t.Errorf("%s: window %d running %+v, want %+v", c.name, i, w.Gauge[Running], g)
			}
			all = append(all, w.Warnings...)
		}
		if c.warnContains != "" && !strings.Contains(strings.Join(all, "\n"), c.warnContains) {
			t.Errorf("%s: no warning contains %q: %q", c.name, c.warnContains, all)
		}
	}
	if ws := Windows(nil, 0, time.Minute, 10*time.Second); ws != nil {
		t.Errorf("windows of no samples = %v, want none", ws)
	}
}
