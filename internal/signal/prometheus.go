package signal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
)

// Querier is the part of Prometheus' HTTP API the Prometheus source uses:
// instant queries (of range selectors too, for the raw scrapes), returning
// the result and the server's warnings. HTTPQuerier is one over
// client_golang's api.Client.
type Querier interface {
	Query(ctx context.Context, query string, ts time.Time) (model.Value, []string, error)
}

// HTTPQuerier runs queries against a Prometheus server through
// client_golang's api/prometheus/v1 client.
type HTTPQuerier struct {
	Client api.Client
}

// Query runs an instant query at ts.
func (h HTTPQuerier) Query(ctx context.Context, query string, ts time.Time) (model.Value, []string, error) {
	v, warn, _, err := promv1.NewAPI(h.Client).Query(ctx, query, ts)
	if err != nil {
		return nil, warn, fmt.Errorf("%s: %w", h.Client.URL("/api/v1/query", nil), err)
	}
	return v, warn, nil
}

// WallClock converts between modelled run time and wall-clock instants;
// *timescale.Clock is one.
type WallClock interface {
	Wall(at time.Duration) time.Time
	At(t time.Time) time.Duration
}

// Prometheus reads the same samples as a Scraper from a Prometheus server
// that scrapes the engines: every family the mapping names, under a label
// selector, summed across series. Each series (instance, job and engine
// labels) is its own part, so restarts and failed scrapes of one copy are
// seen as with a Scraper. A sample "at" a time holds each target's
// Prometheus scrape nearest that time, before or after it (promnear.go), so
// reading a time that has just passed waits for Prometheus' next scrape.
//
// A counter family an engine exposes with no series yet (no 4xx so far)
// reads as zero from a scrape of /metrics but has nothing in Prometheus;
// when the API can say which families each target exposes (Exposer), such
// a family of the same targets as the other series reads as zero too.
type Prometheus struct {
	API      Querier
	Selector string // label matchers in braces, {job="vllm"}; empty for every series
	Mapping  Mapping
	Clock    WallClock // run time to wall time
	// Now and Sleep are the wall clock the source waits on for Prometheus'
	// next scrape; nil is time.Now and a timer.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error

	mu      sync.Mutex
	exposed map[string]bool // counter families seen exposed by the targets, series or not
	rules   ruleCache       // Mapping, compiled once
}

// Exposer is the part of Prometheus' HTTP API that lists the targets
// exposing a metric family, from their last scrape's TYPE lines, whether or
// not the family has series (/api/v1/targets/metadata). HTTPQuerier is one.
type Exposer interface {
	TargetsMetadata(ctx context.Context, metric string) ([]promv1.MetricMetadata, error)
}

// TargetsMetadata lists the targets exposing metric and its type there.
func (h HTTPQuerier) TargetsMetadata(ctx context.Context, metric string) ([]promv1.MetricMetadata, error) {
	md, err := promv1.NewAPI(h.Client).TargetsMetadata(ctx, "", metric, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", h.Client.URL("/api/v1/targets/metadata", nil), err)
	}
	return md, nil
}

// NewPrometheus connects to a Prometheus server's HTTP API at url. client
// may be nil for the default one.
func NewPrometheus(url, selector string, m Mapping, clock WallClock, client *http.Client) (*Prometheus, error) {
	if clock == nil {
		return nil, errors.New("prometheus source needs a clock to turn run time into wall time")
	}
	if _, err := matchersOf(selector); err != nil {
		return nil, err
	}
	c, err := api.NewClient(api.Config{Address: url, Client: client})
	if err != nil {
		return nil, fmt.Errorf("prometheus URL %q: %w (give the server's base URL, http://host:9090)", url, err)
	}
	return &Prometheus{API: HTTPQuerier{Client: c}, Selector: selector, Mapping: m, Clock: clock}, nil
}

// selectorRE loosely checks the shape of a selector's matchers.
var selectorRE = regexp.MustCompile(`^\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*$`)

// matchersOf returns the inside of a selector's braces, checked loosely.
func matchersOf(selector string) (string, error) {
	s := strings.TrimSpace(selector)
	if s == "" || s == "{}" {
		return "", nil
	}
	bad := fmt.Errorf("label selector %q: want matchers in braces, such as {job=\"vllm\",namespace=\"llm\"}", selector)
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return "", bad
	}
	inner := strings.TrimSpace(s[1 : len(s)-1])
	// Split on commas outside quotes.
	var parts []string
	quoted, escaped, from := false, false, 0
	for i, r := range inner {
		switch {
		case escaped:
			escaped = false
		case r == '\\':
			escaped = true
		case r == '"':
			quoted = !quoted
		case r == ',' && !quoted:
			parts = append(parts, inner[from:i])
			from = i + 1
		}
	}
	parts = append(parts, inner[from:])
	for _, p := range parts {
		if strings.TrimSpace(p) == "" {
			continue
		}
		if !selectorRE.MatchString(p) {
			return "", bad
		}
	}
	return inner, nil
}

// query is the PromQL selector for every series the mapping reads, plus up.
func (p *Prometheus) query() (string, error) {
	inner, err := matchersOf(p.Selector)
	if err != nil {
		return "", err
	}
	names := []string{"up"}
	for _, f := range p.Mapping.Families() {
		names = append(names, regexp.QuoteMeta(f), regexp.QuoteMeta(f)+"_(?:bucket|count|sum)")
	}
	q := "{__name__=~" + strconv.Quote(strings.Join(names, "|"))
	if inner != "" {
		q += "," + inner
	}
	return q + "}", nil
}

// Scrape reads the series as Prometheus scraped them nearest the wall time
// of run time at, waiting for the scrape after it when there is none yet.
// It fails when a query fails or no series of the mapping matches; targets
// Prometheus could not scrape (up == 0) are named in Sample.Errors.
func (p *Prometheus) Scrape(ctx context.Context, at time.Duration) (Sample, error) {
	pts, scraped, warnings, err := p.nearestPoints(ctx, []time.Time{p.Clock.Wall(at)})
	if err != nil {
		return NewSample(at), err
	}
	return p.sample(p.scrapedAt(at, scraped[0]), pts[0], warnings, p.exposedCounters(ctx, pts[0]))
}

// scrapedAt is the run time of a sample read for at from scrapes made at
// wall time scraped (their mean): the time the server was in the state the
// sample holds, so the windows cut at it span what its counts cover
// (Windows), up to half of Prometheus' scrape interval from at.
func (p *Prometheus) scrapedAt(at time.Duration, scraped time.Time) time.Duration {
	if scraped.IsZero() {
		return at
	}
	return p.Clock.At(scraped)
}

// Samples reads the series at run times from, from+step, ... up to to, from
// the scrapes Prometheus holds: what Scrape would read at each of those
// times. Times no target was scraped near are left out.
func (p *Prometheus) Samples(ctx context.Context, from, to, step time.Duration) ([]Sample, error) {
	if step <= 0 || to < from {
		return nil, fmt.Errorf("range [%v, %v] step %v: want from <= to and a positive step", from, to, step)
	}
	var ats []time.Duration
	var walls []time.Time
	for at := from; at <= to; at += step {
		ats, walls = append(ats, at), append(walls, p.Clock.Wall(at))
	}
	pts, scraped, warnings, err := p.nearestPoints(ctx, walls)
	if err != nil {
		return nil, err
	}
	out := make([]Sample, 0, len(ats))
	var errs []error
	for i, at := range ats {
		if len(pts[i]) == 0 {
			continue
		}
		s, err := p.sample(p.scrapedAt(at, scraped[i]), pts[i], warnings, p.knownExposed())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.Join(append(errs, fmt.Errorf("prometheus under %q: no samples between %v and %v", p.Selector, from, to))...)
	}
	return out, nil
}

// point is one series' value at one instant.
type point struct {
	metric model.Metric
	value  float64
}

// sample rebuilds metric families from query results and maps them.
func (p *Prometheus) sample(at time.Duration, points []point, warnings, exposed []string) (Sample, error) {
	out := NewSample(at)
	for _, w := range warnings {
		out.Errors = append(out.Errors, "prometheus warning: "+w)
	}
	families, down := p.families(points)
	out.Errors = append(out.Errors, down...)
	if len(families) == 0 {
		return out, fmt.Errorf("no series of %s match selector %q at %v: check the selector and that Prometheus scrapes the engines", strings.Join(p.Mapping.Families(), ", "), p.Selector, at)
	}
	addEmpty(families, exposed)
	if err := p.rules.get(p.Mapping).apply(families, "", &out); err != nil {
		out.Errors = append(out.Errors, err.Error())
	}
	return out, nil
}

// Families returns the metric families Prometheus holds under the selector
// at run time at, for every family the mapping reads, rebuilt as a scrape
// of /metrics would parse them (a histogram's _bucket, _count and _sum
// series as one histogram; other families untyped), with the series'
// target labels (instance, job, pod, ...). Pre-flight checks them as it
// checks the families of a scraped target. down names the targets
// Prometheus could not scrape (up == 0).
func (p *Prometheus) Families(ctx context.Context, at time.Duration) (families map[string]*dto.MetricFamily, down []string, err error) {
	q, err := p.query()
	if err != nil {
		return nil, nil, err
	}
	vec, warnings, err := p.vector(ctx, q, at)
	if err != nil {
		return nil, nil, err
	}
	points := pointsOf(vec)
	families, down = p.families(points)
	addEmpty(families, p.exposedCounters(ctx, points))
	for _, w := range warnings {
		down = append(down, "prometheus warning: "+w)
	}
	return families, down, nil
}

// exposedCounters lists the counter families the mapping reads that have
// no series in points but are exposed by a target that gave one of them
// (same job and instance): an engine's counter with no series yet. A family
// once seen exposed is remembered; nothing is listed when the API cannot
// say (no Exposer, or it fails).
func (p *Prometheus) exposedCounters(ctx context.Context, points []point) []string {
	ex, ok := p.API.(Exposer)
	if !ok {
		return p.knownExposed()
	}
	have := map[string]bool{}
	targets := map[[2]string]bool{}
	for _, pt := range points {
		have[string(pt.metric[model.MetricNameLabel])] = true
		targets[[2]string{string(pt.metric["job"]), string(pt.metric["instance"])}] = true
	}
	var out []string
	for _, r := range p.Mapping {
		if r.Kind != Counter || r.Field != "" || have[r.Metric] || slices.Contains(out, r.Metric) {
			continue
		}
		p.mu.Lock()
		known := p.exposed[r.Metric]
		p.mu.Unlock()
		if !known {
			md, err := ex.TargetsMetadata(ctx, r.Metric)
			if err != nil {
				continue
			}
			for _, m := range md {
				if targets[[2]string{m.Target["job"], m.Target["instance"]}] {
					known = true
				}
			}
		}
		if known {
			p.mu.Lock()
			if p.exposed == nil {
				p.exposed = map[string]bool{}
			}
			p.exposed[r.Metric] = true
			p.mu.Unlock()
			out = append(out, r.Metric)
		}
	}
	return out
}

// knownExposed lists the counter families seen exposed so far.
func (p *Prometheus) knownExposed() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return sortedKeys(p.exposed)
}

// addEmpty adds each named family that has no series as a counter family
// without series, as a scrape of /metrics parses a TYPE line alone.
func addEmpty(families map[string]*dto.MetricFamily, names []string) {
	for _, name := range names {
		if _, ok := families[name]; !ok {
			families[name] = &dto.MetricFamily{Name: new(name), Type: dto.MetricType_COUNTER.Enum()}
		}
	}
}

// FamilyNames lists the names of the series under the selector at run time
// at whose names match the RE2 pattern (anchored, as PromQL's =~), such as
// "vllm:.+|sglang:.+" to tell which engine is behind them. It asks for the
// names only (count by (__name__)), not every series.
func (p *Prometheus) FamilyNames(ctx context.Context, at time.Duration, pattern string) ([]string, error) {
	inner, err := matchersOf(p.Selector)
	if err != nil {
		return nil, err
	}
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, fmt.Errorf("family name pattern %q: %w", pattern, err)
	}
	sel := "{__name__=~" + strconv.Quote(pattern)
	if inner != "" {
		sel += "," + inner
	}
	vec, _, err := p.vector(ctx, "count by (__name__) ("+sel+"})", at)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range vec {
		out = append(out, string(s.Metric[model.MetricNameLabel]))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// pointsOf is an instant query's vector as points.
func pointsOf(vec model.Vector) []point {
	points := make([]point, 0, len(vec))
	for _, s := range vec {
		points = append(points, point{s.Metric, float64(s.Value)})
	}
	return points
}

// vector runs an instant query at the wall time of run time at.
func (p *Prometheus) vector(ctx context.Context, q string, at time.Duration) (model.Vector, []string, error) {
	v, warnings, err := p.API.Query(ctx, q, p.Clock.Wall(at))
	if err != nil {
		return nil, warnings, fmt.Errorf("prometheus query %s: %w", q, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, warnings, fmt.Errorf("prometheus query %s returned a %s, want a vector", q, v.Type())
	}
	return vec, warnings, nil
}

// families rebuilds metric families from query results; down names the
// targets whose up series is 0.
func (p *Prometheus) families(points []point) (families map[string]*dto.MetricFamily, down []string) {
	families = map[string]*dto.MetricFamily{}
	plain := map[string]bool{}
	for _, f := range p.Mapping.Families() {
		plain[f] = true
	}
	// A family the mapping reads as a counter or gauge takes that type, as
	// in the engine's own exposition; any other plain family is untyped.
	kinds := map[string]Kind{}
	for _, r := range p.Mapping {
		if r.Field == "" && r.Kind != Histogram {
			kinds[r.Metric] = r.Kind
		}
	}
	hists := map[string]map[model.Fingerprint]*dto.Metric{}
	for _, pt := range points {
		name := string(pt.metric[model.MetricNameLabel])
		if name == "up" {
			if pt.value == 0 {
				down = append(down, fmt.Sprintf("%s: Prometheus could not scrape this target (up == 0)", labelsOf(pt.metric)))
			}
			if !plain[name] {
				continue
			}
		}
		if plain[name] {
			mf := families[name]
			if mf == nil {
				mf = &dto.MetricFamily{Name: &name, Type: dto.MetricType_UNTYPED.Enum()}
				switch kinds[name] {
				case Counter:
					mf.Type = dto.MetricType_COUNTER.Enum()
				case Gauge:
					mf.Type = dto.MetricType_GAUGE.Enum()
				}
				families[name] = mf
			}
			m := &dto.Metric{Label: labelPairs(pt.metric)}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				m.Counter = &dto.Counter{Value: &pt.value}
			case dto.MetricType_GAUGE:
				m.Gauge = &dto.Gauge{Value: &pt.value}
			default:
				m.Untyped = &dto.Untyped{Value: &pt.value}
			}
			mf.Metric = append(mf.Metric, m)
			continue
		}
		base, suffix, ok := splitHistogramName(name, plain)
		if !ok {
			continue
		}
		if hists[base] == nil {
			hists[base] = map[model.Fingerprint]*dto.Metric{}
		}
		key := pt.metric.Clone()
		delete(key, model.MetricNameLabel)
		delete(key, model.BucketLabel)
		fp := key.Fingerprint()
		m := hists[base][fp]
		if m == nil {
			m = &dto.Metric{Label: labelPairs(key), Histogram: &dto.Histogram{}}
			hists[base][fp] = m
		}
		v := pt.value
		switch suffix {
		case "_count":
			m.Histogram.SampleCountFloat = &v
		case "_sum":
			m.Histogram.SampleSum = &v
		case "_bucket":
			le, err := strconv.ParseFloat(string(pt.metric[model.BucketLabel]), 64)
			if err != nil {
				continue
			}
			m.Histogram.Bucket = append(m.Histogram.Bucket, &dto.Bucket{UpperBound: &le, CumulativeCountFloat: &v})
		}
	}
	for base, series := range hists {
		mf := &dto.MetricFamily{Name: &base, Type: dto.MetricType_HISTOGRAM.Enum()}
		for _, fp := range sortedFingerprints(series) {
			m := series[fp]
			if m.Histogram.SampleCountFloat == nil {
				// Without _count, the +Inf bucket is the count.
				for _, b := range m.Histogram.Bucket {
					if math.IsInf(b.GetUpperBound(), 1) {
						c := b.GetCumulativeCountFloat()
						m.Histogram.SampleCountFloat = &c
					}
				}
			}
			mf.Metric = append(mf.Metric, m)
		}
		families[base] = mf
	}
	return families, down
}

// splitHistogramName splits "x_bucket" into "x" and "_bucket" when x is a
// family the mapping reads and the name itself is not one.
func splitHistogramName(name string, families map[string]bool) (base, suffix string, ok bool) {
	for _, suf := range []string{"_bucket", "_count", "_sum"} {
		if b, found := strings.CutSuffix(name, suf); found && families[b] {
			return b, suf, true
		}
	}
	return "", "", false
}

func sortedFingerprints(m map[model.Fingerprint]*dto.Metric) []model.Fingerprint {
	out := make([]model.Fingerprint, 0, len(m))
	for fp := range m {
		out = append(out, fp)
	}
	slices.Sort(out)
	return out
}

// labelPairs converts a metric's labels, less its name and le.
func labelPairs(m model.Metric) []*dto.LabelPair {
	var out []*dto.LabelPair
	for name, value := range m {
		if name == model.MetricNameLabel || name == model.BucketLabel {
			continue
		}
		out = append(out, &dto.LabelPair{Name: new(string(name)), Value: new(string(value))})
	}
	slices.SortFunc(out, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// labelsOf formats a metric's labels, less its name, as {a="x",b="y"}.
func labelsOf(m model.Metric) string {
	var parts []string
	for _, lp := range labelPairs(m) {
		parts = append(parts, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}
