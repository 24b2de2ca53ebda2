// Package signal reads what the servers report: it scrapes Prometheus metric
// endpoints or queries a Prometheus server, maps each engine's metric names
// onto headroom's common names, and cuts the samples into windows of deltas.
package signal

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/headroom-bench/headroom/internal/stats"
)

// Common names of the signals headroom judges with. Histograms and gauges are
// in seconds and fractions; counters are plain counts.
const (
	TTFT               = "ttft_seconds"         // histogram: time to first token
	EngineTTFT         = "engine_ttft_seconds"  // histogram: TTFT measured inside the engine when TTFT comes from a gateway
	TPOT               = "tpot_seconds"         // histogram: per-request time per output token (each request's decode time over its output tokens after the first): what interactivity is judged on
	ITL                = "itl_seconds"          // histogram: inter-token latency, one observation per token; interactivity is derived from it (DerivedTPOT) only where no TPOT is reported
	E2E                = "e2e_seconds"          // histogram: end-to-end request latency
	Queue              = "queue_seconds"        // histogram: time spent waiting in the queue
	RequestsOK         = "requests_ok"          // counter: requests that finished normally
	RequestsAborted    = "requests_aborted"     // counter: requests aborted by the engine or the client
	RequestsFailed     = "requests_failed"      // counter: requests that ended in an error without an HTTP status class (timeouts, exceptions)
	HTTP2xx            = "http_2xx"             // counter
	HTTP4xx            = "http_4xx"             // counter: refusals such as context too long
	HTTP5xx            = "http_5xx"             // counter: server errors
	PromptTokens       = "prompt_tokens"        // counter
	GenerationTokens   = "generation_tokens"    // counter
	PrefixCacheHits    = "prefix_cache_hits"    // counter (tokens)
	PrefixCacheQueries = "prefix_cache_queries" // counter (tokens)
	PromptTokensCached = "prompt_tokens_cached" // counter (tokens): the prompt tokens served from cache, counted with prompt_tokens
	Preemptions        = "preemptions"          // counter: preempted or retracted requests
	Running            = "running"              // gauge: requests running
	Waiting            = "waiting"              // gauge: requests waiting
	RequestsActive     = "requests_active"      // gauge: requests callers still have open at the gateway
	KVCacheUsage       = "kv_cache_usage"       // gauge: fraction 0..1 of the KV cache in use
)

// DerivedTPOT says how the per-request time per output token that
// interactivity is judged on is derived where a server reports only
// per-token latency (SGLang: sglang:inter_token_latency_seconds, and no
// per-request histogram). A per-token P90 is not the same quantity: it
// leaves out the pauses a stream waits through (a prefill batch stops every
// decode), which a request's own time per output token counts.
const DerivedTPOT = "derived from per-token latency (itl_seconds): in each window, decode seconds over output tokens after the first " +
	"(the histogram's sum over its count), the requests' own time per output token averaged over their tokens, pauses included; " +
	"the P90 is over windows weighted by tokens, so it does not see how requests inside one window differ"

// Kind is the type of a common signal.
type Kind string

// Kinds of signals.
const (
	Counter   Kind = "counter"
	Gauge     Kind = "gauge"
	Histogram Kind = "histogram"
)

// commonKinds is every common name with the kind its rules must have.
var commonKinds = map[string]Kind{
	TTFT: Histogram, EngineTTFT: Histogram, TPOT: Histogram, ITL: Histogram, E2E: Histogram, Queue: Histogram,
	RequestsOK: Counter, RequestsAborted: Counter, RequestsFailed: Counter,
	HTTP2xx: Counter, HTTP4xx: Counter, HTTP5xx: Counter,
	PromptTokens: Counter, GenerationTokens: Counter, PrefixCacheHits: Counter, PrefixCacheQueries: Counter, PromptTokensCached: Counter, Preemptions: Counter,
	Running: Gauge, Waiting: Gauge, RequestsActive: Gauge, KVCacheUsage: Gauge,
}

// CommonNames returns every common name with its kind (a copy).
func CommonNames() map[string]Kind { return maps.Clone(commonKinds) }

// Rule maps one engine series family (and label matchers) onto a common name.
//
// A Match value is an anchored RE2 regular expression on the label's value,
// as PromQL's =~ ("stop|length", "5.."); a leading "!" negates it, as !~. A
// label the series lacks has the value "", so "" matches only series without
// the label and "!" (an empty negated pattern) only series with it.
//
// Scale converts units (0.001 for ms to s); 0 means 1. For histograms it
// scales bucket bounds and the sum, never the counts.
//
// Field reads a histogram family as a counter: "count" is its number of
// observations, "sum" the sum of them (tokens from an OpenTelemetry token
// usage histogram). Empty for a family read as what it is.
//
// Note says, for people, what the series measures where that is not what
// the common name means and how headroom reads it (SGLang's per-token
// latency, from which per-request time per output token is derived).
type Rule struct {
	Common string            `json:"common"`
	Metric string            `json:"metric"`
	Match  map[string]string `json:"match,omitempty"`
	Kind   Kind              `json:"kind"`
	Scale  float64           `json:"scale,omitempty"`
	Field  string            `json:"field,omitempty"`
	Note   string            `json:"note,omitempty"`
}

// Mapping is the set of rules for one engine or gateway. Series that match
// several rules for the same common name are counted once per rule.
type Mapping []Rule

// metricName is a legal Prometheus metric name, colons included.
var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// labelName is a legal Prometheus label name.
var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Check reports the first thing wrong with the rule, naming the field.
func (r Rule) Check() error {
	want, known := commonKinds[r.Common]
	switch {
	case r.Common == "":
		return errors.New("common: empty; name the signal the rule feeds (ttft_seconds, http_5xx, ...)")
	case !known:
		return fmt.Errorf("common: %q is not a common name; use one of %s", r.Common, strings.Join(sortedKeys(commonKinds), ", "))
	case !metricName.MatchString(r.Metric):
		return fmt.Errorf("metric: %q is not a Prometheus metric name (letters, digits, _ and :)", r.Metric)
	case r.Kind != Counter && r.Kind != Gauge && r.Kind != Histogram:
		return fmt.Errorf("kind: %q; use counter, gauge or histogram", r.Kind)
	case r.Kind != want:
		return fmt.Errorf("kind: %s is a %s, the rule says %s", r.Common, want, r.Kind)
	case r.Scale < 0 || math.IsNaN(r.Scale) || math.IsInf(r.Scale, 0):
		return fmt.Errorf("scale: %g; use a positive factor (0.001 for ms to s), or leave it out for 1", r.Scale)
	case r.Field != "" && r.Field != "count" && r.Field != "sum":
		return fmt.Errorf("field: %q; use count or sum (of a histogram read as a counter), or leave it out", r.Field)
	case r.Field != "" && r.Kind != Counter:
		return fmt.Errorf("field: %q needs kind counter, the rule says %s", r.Field, r.Kind)
	}
	for _, name := range sortedKeys(r.Match) {
		if !labelName.MatchString(name) || name == "le" || name == "quantile" {
			return fmt.Errorf("match: %q is not a label a rule can match on", name)
		}
		if _, err := regexp.Compile(matchPattern(r.Match[name])); err != nil {
			return fmt.Errorf("match: %s: %q is not a regular expression: %v", name, r.Match[name], err)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// matchPattern anchors a Match value, without its "!" prefix.
func matchPattern(v string) string {
	return "^(?:" + strings.TrimPrefix(v, "!") + ")$"
}

// matcher is one compiled Match entry.
type matcher struct {
	label  string
	re     *regexp.Regexp
	negate bool
}

// compiledRule is a checked rule with its matchers compiled.
type compiledRule struct {
	Rule
	scale    float64
	matchers []matcher
}

func (m Mapping) compile() ([]compiledRule, error) {
	out := make([]compiledRule, 0, len(m))
	for i, r := range m {
		if err := r.Check(); err != nil {
			return nil, fmt.Errorf("mapping rule %d (%s <- %s): %w", i, r.Common, r.Metric, err)
		}
		c := compiledRule{Rule: r, scale: r.Scale}
		if c.scale == 0 {
			c.scale = 1
		}
		for _, name := range sortedKeys(r.Match) {
			v := r.Match[name]
			c.matchers = append(c.matchers, matcher{label: name, re: regexp.MustCompile(matchPattern(v)), negate: strings.HasPrefix(v, "!")})
		}
		out = append(out, c)
	}
	return out, nil
}

// Notes lists the rules' notes as "common <- metric: note", in rule order.
func (m Mapping) Notes() []string {
	var out []string
	for _, r := range m {
		if r.Note != "" {
			out = append(out, r.Common+" <- "+r.Metric+": "+r.Note)
		}
	}
	return out
}

// Families lists the metric families the mapping reads, sorted, each once.
func (m Mapping) Families() []string {
	var out []string
	for _, r := range m {
		if !slices.Contains(out, r.Metric) {
			out = append(out, r.Metric)
		}
	}
	slices.Sort(out)
	return out
}

// Parse reads Prometheus text exposition (format 0.0.4), maps the families
// named by the rules onto common names and adds them into into, keeping each
// series group's raw values in into.Parts (see Sample). Families no rule names
// are ignored. Non-finite counter or gauge values are skipped.
func (m Mapping) Parse(r io.Reader, into *Sample) error {
	return m.parse(r, "", into)
}

// parse is Parse with part keys prefixed by the target they came from.
func (m Mapping) parse(r io.Reader, prefix string, into *Sample) error {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return fmt.Errorf("parsing metrics exposition: %w (is the target a Prometheus /metrics endpoint in text format?)", err)
	}
	return m.add(families, prefix, into)
}

// add maps parsed families into the sample; the Prometheus source builds the
// same families from query results, so both sources share this code.
// Sources that apply one mapping many times keep it compiled (ruleCache).
func (m Mapping) add(families map[string]*dto.MetricFamily, prefix string, into *Sample) error {
	into.init()
	rules, err := m.compile()
	if err != nil {
		return err
	}
	return addRules(rules, families, prefix, into)
}

// addRules is add with the rules compiled; into is initialised.
func addRules(rules []compiledRule, families map[string]*dto.MetricFamily, prefix string, into *Sample) error {
	var errs []error
	for _, rule := range rules {
		mf, ok := families[rule.Metric]
		if !ok {
			continue
		}
		for _, metric := range mf.GetMetric() {
			if !rule.matches(metric) {
				continue
			}
			part := prefix + rule.partKey(metric)
			switch rule.Kind {
			case Histogram:
				h, ok := histogramOf(metric, rule.scale)
				if !ok {
					errs = append(errs, fmt.Errorf("%s: rule for %s wants a histogram but the family is %s", rule.Metric, rule.Common, mf.GetType()))
					continue
				}
				if err := into.addHist(part, rule.Common, h); err != nil {
					errs = append(errs, fmt.Errorf("%s -> %s: %w", rule.Metric, rule.Common, err))
				}
			case Counter, Gauge:
				v, ok := valueOf(metric, rule.Field)
				if !ok {
					want := string(rule.Kind)
					if rule.Field != "" {
						want = "histogram (field " + rule.Field + ")"
					}
					errs = append(errs, fmt.Errorf("%s: rule for %s wants a %s but the family is %s", rule.Metric, rule.Common, want, mf.GetType()))
					continue
				}
				if math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				if rule.Kind == Counter {
					into.addCounter(part, rule.Common, v*rule.scale)
				} else {
					into.addGauge(rule.Common, v*rule.scale)
				}
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

// matches reports whether every matcher of the rule holds for the series; a
// label the series lacks has the value "".
func (r compiledRule) matches(m *dto.Metric) bool {
	for _, mt := range r.matchers {
		got := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == mt.label {
				got = lp.GetValue()
				break
			}
		}
		if mt.re.MatchString(got) == mt.negate {
			return false
		}
	}
	return true
}

// partKey names the series group a series belongs to: its labels, less the
// ones the rule matches on (series that differ only there are one process's
// split of one count, summed into one part) and less le and quantile.
func (r compiledRule) partKey(m *dto.Metric) string {
	var b strings.Builder
	labels := slices.Clone(m.GetLabel())
	slices.SortFunc(labels, func(x, y *dto.LabelPair) int { return strings.Compare(x.GetName(), y.GetName()) })
	for _, lp := range labels {
		name := lp.GetName()
		if name == "le" || name == "quantile" || name == model.MetricNameLabel {
			continue
		}
		if _, ok := r.Match[name]; ok {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", name, lp.GetValue())
	}
	if b.Len() == 0 {
		return ""
	}
	return "{" + b.String() + "}"
}

// valueOf reads a counter, gauge or untyped value, or with field "count" or
// "sum" a histogram's count or sum.
func valueOf(m *dto.Metric, field string) (float64, bool) {
	if field != "" {
		h := m.GetHistogram()
		if h == nil {
			return 0, false
		}
		if field == "sum" {
			return h.GetSampleSum(), true
		}
		if h.SampleCountFloat != nil {
			return h.GetSampleCountFloat(), true
		}
		return float64(h.GetSampleCount()), true
	}
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
