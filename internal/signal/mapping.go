// Package signal reads what the servers report: it scrapes Prometheus metric
// sources, maps each engine's metric names onto headroom's common names, and
// cuts the samples into windows of deltas.
package signal

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/headroom-bench/headroom/internal/stats"
)

// Common names of the signals headroom judges with. Histograms and gauges are
// in seconds and fractions; counters are plain counts.
const (
	TTFT               = "ttft_seconds"         // histogram: time to first token
	TPOT               = "tpot_seconds"         // histogram: per-request time per output token
	ITL                = "itl_seconds"          // histogram: inter-token latency
	E2E                = "e2e_seconds"          // histogram: end-to-end request latency
	Queue              = "queue_seconds"        // histogram: time spent waiting in the queue
	RequestsOK         = "requests_ok"          // counter: requests that finished normally
	RequestsAborted    = "requests_aborted"     // counter: requests aborted by the engine or the client
	HTTP2xx            = "http_2xx"             // counter
	HTTP4xx            = "http_4xx"             // counter: refusals such as context too long
	HTTP5xx            = "http_5xx"             // counter: server errors
	PromptTokens       = "prompt_tokens"        // counter
	GenerationTokens   = "generation_tokens"    // counter
	PrefixCacheHits    = "prefix_cache_hits"    // counter (tokens)
	PrefixCacheQueries = "prefix_cache_queries" // counter (tokens)
	Preemptions        = "preemptions"          // counter
	Running            = "running"              // gauge: requests running
	Waiting            = "waiting"              // gauge: requests waiting
	KVCacheUsage       = "kv_cache_usage"       // gauge: fraction 0..1 of the KV cache in use
)

// Kind is the type of a common signal.
type Kind string

// Kinds of signals.
const (
	Counter   Kind = "counter"
	Gauge     Kind = "gauge"
	Histogram Kind = "histogram"
)

// Rule maps one engine series family (and label matchers) onto a common name.
// A Match value may list alternatives separated by "|" ("stop|length").
// Scale converts units (0.001 for ms to s); 0 means 1. For histograms it
// scales bucket bounds and the sum, never the counts.
type Rule struct {
	Common string            `json:"common"`
	Metric string            `json:"metric"`
	Match  map[string]string `json:"match,omitempty"`
	Kind   Kind              `json:"kind"`
	Scale  float64           `json:"scale,omitempty"`
}

// Mapping is the set of rules for one engine or gateway. Series that match
// several rules for the same common name are counted once per rule.
type Mapping []Rule

// VLLM is the mapping for vLLM v1's /metrics (and its API server's HTTP
// counters from prometheus-fastapi-instrumentator).
func VLLM() Mapping {
	chat := func(status string) map[string]string {
		return map[string]string{"handler": "/v1/chat/completions", "status": status}
	}
	return Mapping{
		{Common: TTFT, Metric: "vllm:time_to_first_token_seconds", Kind: Histogram},
		{Common: TPOT, Metric: "vllm:request_time_per_output_token_seconds", Kind: Histogram},
		{Common: ITL, Metric: "vllm:inter_token_latency_seconds", Kind: Histogram},
		{Common: E2E, Metric: "vllm:e2e_request_latency_seconds", Kind: Histogram},
		{Common: Queue, Metric: "vllm:request_queue_time_seconds", Kind: Histogram},
		{Common: RequestsOK, Metric: "vllm:request_success_total", Match: map[string]string{"finished_reason": "stop|length"}, Kind: Counter},
		{Common: RequestsAborted, Metric: "vllm:request_success_total", Match: map[string]string{"finished_reason": "abort"}, Kind: Counter},
		{Common: HTTP2xx, Metric: "http_requests_total", Match: chat("2xx"), Kind: Counter},
		{Common: HTTP4xx, Metric: "http_requests_total", Match: chat("4xx"), Kind: Counter},
		{Common: HTTP5xx, Metric: "http_requests_total", Match: chat("5xx"), Kind: Counter},
		{Common: PromptTokens, Metric: "vllm:prompt_tokens_total", Kind: Counter},
		{Common: GenerationTokens, Metric: "vllm:generation_tokens_total", Kind: Counter},
		{Common: PrefixCacheHits, Metric: "vllm:prefix_cache_hits_total", Kind: Counter},
		{Common: PrefixCacheQueries, Metric: "vllm:prefix_cache_queries_total", Kind: Counter},
		{Common: Preemptions, Metric: "vllm:num_preemptions_total", Kind: Counter},
		{Common: Running, Metric: "vllm:num_requests_running", Kind: Gauge},
		{Common: Waiting, Metric: "vllm:num_requests_waiting", Kind: Gauge},
		{Common: KVCacheUsage, Metric: "vllm:kv_cache_usage_perc", Kind: Gauge},
	}
}

// Sample is one scrape of every target, mapped to common names, with series
// summed across targets, labels and ranks (except kv_cache_usage, a fraction,
// which keeps the fullest series).
type Sample struct {
	At      time.Duration              `json:"at"` // modelled time since run start
	Hist    map[string]stats.Histogram `json:"hist"`
	Counter map[string]float64         `json:"counter"`
	Gauge   map[string]float64         `json:"gauge"`
	Errors  []string                   `json:"errors,omitempty"` // targets that failed this scrape
}

// NewSample returns an empty sample taken at modelled time at.
func NewSample(at time.Duration) Sample {
	return Sample{At: at, Hist: map[string]stats.Histogram{}, Counter: map[string]float64{}, Gauge: map[string]float64{}}
}

func (s *Sample) init() {
	if s.Hist == nil {
		s.Hist = map[string]stats.Histogram{}
	}
	if s.Counter == nil {
		s.Counter = map[string]float64{}
	}
	if s.Gauge == nil {
		s.Gauge = map[string]float64{}
	}
}

// addGauge combines one more series of a gauge: fractions (KV cache usage)
// take the fullest copy, since one full copy is what stalls requests; counts
// of requests are summed.
func (s *Sample) addGauge(name string, v float64) {
	old, ok := s.Gauge[name]
	switch {
	case !ok:
		s.Gauge[name] = v
	case name == KVCacheUsage:
		s.Gauge[name] = math.Max(old, v)
	default:
		s.Gauge[name] = old + v
	}
}

// Merge adds another target's sample into s (At and Errors of s are kept,
// o's errors appended). Histograms with different bounds are not merged and
// are reported in the error.
func (s *Sample) Merge(o Sample) error {
	s.init()
	var errs []error
	for name, h := range o.Hist {
		sum, err := s.Hist[name].Add(h)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		s.Hist[name] = sum
	}
	for name, v := range o.Counter {
		s.Counter[name] += v
	}
	for name, v := range o.Gauge {
		s.addGauge(name, v)
	}
	s.Errors = append(s.Errors, o.Errors...)
	return errors.Join(errs...)
}

// Parse reads Prometheus text exposition (format 0.0.4), maps the families
// named by the rules onto common names and adds them into into. Families no
// rule names are ignored. Non-finite counter or gauge values are skipped.
func (m Mapping) Parse(r io.Reader, into *Sample) error {
	into.init()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return fmt.Errorf("parsing metrics exposition: %w (is the target a Prometheus /metrics endpoint in text format?)", err)
	}
	var errs []error
	for _, rule := range m {
		mf, ok := families[rule.Metric]
		if !ok {
			continue
		}
		scale := rule.Scale
		if scale == 0 {
			scale = 1
		}
		for _, metric := range mf.GetMetric() {
			if !rule.matches(metric) {
				continue
			}
			switch rule.Kind {
			case Histogram:
				h, ok := histogramOf(metric, scale)
				if !ok {
					errs = append(errs, fmt.Errorf("%s: rule for %s wants a histogram but the family is %s", rule.Metric, rule.Common, mf.GetType()))
					continue
				}
				sum, err := into.Hist[rule.Common].Add(h)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s -> %s: %w", rule.Metric, rule.Common, err))
					continue
				}
				into.Hist[rule.Common] = sum
			case Counter, Gauge:
				v, ok := valueOf(metric)
				if !ok {
					errs = append(errs, fmt.Errorf("%s: rule for %s wants a %s but the family is %s", rule.Metric, rule.Common, rule.Kind, mf.GetType()))
					continue
				}
				if math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				if rule.Kind == Counter {
					into.Counter[rule.Common] += v * scale
				} else {
					into.addGauge(rule.Common, v*scale)
				}
			default:
				errs = append(errs, fmt.Errorf("rule for %s has kind %q: use counter, gauge or histogram", rule.Common, rule.Kind))
			}
		}
		// A counter family the engine exposes is present even when no series
		// matches yet: no 5xx so far is a count of zero, not a missing signal.
		if rule.Kind == Counter {
			into.Counter[rule.Common] += 0
		}
	}
	return errors.Join(errs...)
}

// matches reports whether every matcher of the rule holds for the series.
func (r Rule) matches(m *dto.Metric) bool {
	for name, want := range r.Match {
		got, found := "", false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == name {
				got, found = lp.GetValue(), true
				break
			}
		}
		if !found || !slices.Contains(strings.Split(want, "|"), got) {
			return false
		}
	}
	return true
}

func valueOf(m *dto.Metric) (float64, bool) {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Untyped != nil:
		return m.Untyped.GetValue(), true
	}
	return 0, false
}

// histogramOf converts a classic Prometheus histogram, adding the +Inf bucket
// when the exposition left it implicit.
func histogramOf(m *dto.Metric, scale float64) (stats.Histogram, bool) {
	ph := m.GetHistogram()
	if ph == nil {
		return stats.Histogram{}, false
	}
	bs := slices.Clone(ph.GetBucket())
	slices.SortFunc(bs, func(a, b *dto.Bucket) int {
		switch {
		case a.GetUpperBound() < b.GetUpperBound():
			return -1
		case a.GetUpperBound() > b.GetUpperBound():
			return 1
		}
		return 0
	})
	h := stats.Histogram{Count: float64(ph.GetSampleCount()), Sum: ph.GetSampleSum() * scale}
	if ph.SampleCountFloat != nil {
		h.Count = ph.GetSampleCountFloat()
	}
	for _, b := range bs {
		c := float64(b.GetCumulativeCount())
		if b.CumulativeCountFloat != nil {
			c = b.GetCumulativeCountFloat()
		}
		u := b.GetUpperBound()
		if !math.IsInf(u, 1) {
			u *= scale
		}
		h.Upper = append(h.Upper, u)
		h.Cumulative = append(h.Cumulative, c)
	}
	if n := len(h.Upper); n == 0 || !math.IsInf(h.Upper[n-1], 1) {
		h.Upper = append(h.Upper, math.Inf(1))
		h.Cumulative = append(h.Cumulative, h.Count)
	}
	return h, true
}
