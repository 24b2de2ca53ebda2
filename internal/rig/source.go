package rig

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/discover"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/transport"
)

// metricsSource is where the run reads the servers' metrics, chosen in one
// place (newSource) from the recipe: fixed /metrics URLs (recipe.metrics),
// the pods found through Kubernetes (recipe.discovery), a Prometheus server
// (recipe.prometheus), or a Prometheus server besides scraped targets, their
// samples summed. The sweep reads it through Scrape; pre-flight through
// families, engine and check.
type metricsSource struct {
	mapping signal.Mapping
	scraper *signal.Scraper    // fixed or discovered targets; nil with Prometheus alone
	prom    *signal.Prometheus // nil without recipe.prometheus
	fixed   bool               // the scraper's targets are fixed URLs, not discovered pods
	probe   *http.Client       // the metrics targets' access, a new connection per request
	from    string             // what is read, for pre-flight's detail

	mu       sync.Mutex
	warnings []string // found by pre-flight's checks
}

// kubeConnect makes a Kubernetes client from a kubeconfig file and context
// and says the context's namespace; discover.Connect is the real one.
type kubeConnect func(kubeconfig, kubeContext string) (kubernetes.Interface, string, error)

// probeScrapes is how many times pre-flight reads each fixed metrics URL,
// each on a new connection, to see whether it answers from one process.
const probeScrapes = 6

// newSource builds the run's metrics source. metrics are the fixed
// /metrics URLs (the simulator's when the endpoint is "sim"); kube connects
// to the cluster when the recipe discovers its pods.
func newSource(cfg config.Run, metrics []string, mapping signal.Mapping, acc access, clock signal.WallClock, kube kubeConnect) (*metricsSource, error) {
	rc := cfg.Recipe
	src := &metricsSource{mapping: mapping}
	var from []string
	switch {
	case rc.Discovery != nil && rc.Discovery.Kubernetes != nil:
		spec := *rc.Discovery.Kubernetes
		if spec.Kubeconfig != "" {
			spec.Kubeconfig = rc.Path(spec.Kubeconfig)
		}
		client, namespace, err := kube(spec.Kubeconfig, spec.Context)
		if err != nil {
			return nil, fmt.Errorf("recipe.discovery.kubernetes: %w", err)
		}
		k, err := discover.NewKubernetes(client, spec, namespace)
		if err != nil {
			return nil, err
		}
		src.scraper = &signal.Scraper{Discover: k.Targets, Mapping: mapping, Client: acc.metrics.Client(probeTimeout)}
		from = append(from, k.String())
	case len(metrics) > 0:
		src.scraper, src.fixed, src.probe = &signal.Scraper{Targets: metrics, Mapping: mapping, Client: acc.metrics.Client(probeTimeout), Sequential: cfg.TimeScale.Virtual()}, true, probeClient(acc)
		from = append(from, fixedURLs(len(metrics)))
	}
	if p := rc.Prometheus; p != nil {
		prom, err := signal.NewPrometheus(p.URL, p.Selector, mapping, clock, acc.prometheus.Client(probeTimeout))
		if err != nil {
			return nil, fmt.Errorf("recipe.prometheus: %w", err)
		}
		src.prom = prom
		sel := p.Selector
		if strings.TrimSpace(sel) == "" {
			sel = "every series"
		}
		from = append(from, fmt.Sprintf("Prometheus at %s under %s", transport.URL(p.URL), sel))
	}
	if src.scraper == nil && src.prom == nil {
		return nil, errors.New("recipe: no metrics source; give recipe.metrics (the /metrics URLs), recipe.discovery (find the pods) or recipe.prometheus (a Prometheus server that scrapes them)")
	}
	src.from = "metrics from " + strings.Join(from, " and ")
	return src, nil
}

// fixedSource reads the fixed /metrics URLs of an existing scraper, the
// source of a recipe that names recipe.metrics alone.
func fixedSource(sc *signal.Scraper, acc access) *metricsSource {
	return &metricsSource{mapping: sc.Mapping, scraper: sc, fixed: true, probe: probeClient(acc), from: "metrics from " + fixedURLs(len(sc.Targets))}
}

// probeClient reaches the metrics targets on a new connection per request:
// a Service balances connections, not requests.
func probeClient(acc access) *http.Client {
	base := transport.Base()
	base.DisableKeepAlives = true
	return &http.Client{Transport: acc.metrics.Wrap(base), Timeout: probeTimeout}
}

// fixedURLs says how many fixed /metrics URLs are read.
func fixedURLs(n int) string {
	return fmt.Sprintf("%d fixed /metrics URL%s", n, map[bool]string{true: "s"}[n != 1])
}

// Scrape reads every source at once and sums their samples; a source that
// fails is named in Sample.Errors, and the error is non-nil only when none
// answered.
// ScrapeLater reads the targets now and, on a virtual clock, parses them on
// a goroutine of its own (signal.Scraper.ScrapeLater); a source that also
// asks a Prometheus server scrapes whole, as Scrape does.
func (m *metricsSource) ScrapeLater(ctx context.Context, at time.Duration) *signal.Pending {
	if m.prom == nil {
		return m.scraper.ScrapeLater(ctx, at)
	}
	return signal.Finished(m.Scrape(ctx, at))
}

func (m *metricsSource) Scrape(ctx context.Context, at time.Duration) (signal.Sample, error) {
	switch {
	case m.prom == nil:
		return m.scraper.Scrape(ctx, at)
	case m.scraper == nil:
		return m.prom.Scrape(ctx, at)
	}
	var ss, ps signal.Sample
	var serr, perr error
	var wg sync.WaitGroup
	wg.Go(func() { ss, serr = m.scraper.Scrape(ctx, at) })
	wg.Go(func() { ps, perr = m.prom.Scrape(ctx, at) })
	wg.Wait()
	switch {
	case serr != nil && perr != nil:
		return ss, fmt.Errorf("%w; and prometheus: %w", serr, perr)
	case serr != nil:
		ps.Errors = append(ps.Errors, "metrics targets: "+serr.Error())
		return ps, nil
	case perr != nil:
		ss.Errors = append(ss.Errors, "prometheus: "+perr.Error())
		return ss, nil
	}
	// Parts are keyed by target URL on one side and by series labels on the
	// other, so they never collide; check says when both read one server.
	if err := ss.Merge(ps); err != nil {
		ss.Errors = append(ss.Errors, "summing Prometheus with the metrics targets: "+err.Error())
	}
	return ss, nil
}

// Warnings are what the run should report about its metrics: URLs seen
// answering from different processes, by pre-flight or during the sweep.
func (m *metricsSource) Warnings() []string {
	m.mu.Lock()
	out := slices.Clone(m.warnings)
	m.mu.Unlock()
	if m.scraper != nil {
		for _, w := range m.scraper.Warnings() {
			if !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	return out
}

// families reads, for pre-flight, the metric families each source holds:
// one map per scraped target, and one of the series Prometheus holds under
// the selector at run time at (with their target labels). A target that
// does not answer, or Prometheus failing, is the error.
func (m *metricsSource) families(ctx context.Context, at time.Duration) ([]map[string]*dto.MetricFamily, error) {
	var out []map[string]*dto.MetricFamily
	if m.scraper != nil {
		fams, err := m.scraper.Families(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, fams...)
	}
	if m.prom != nil {
		fams, _, err := m.prom.Families(ctx, at)
		if err != nil {
			return nil, err
		}
		out = append(out, fams)
	}
	return out, nil
}

// engine tells the engine behind the metrics from family prefixes (vllm:*
// or sglang:*): from the families read, and through Prometheus from the
// names of every series under the selector, since its families hold only
// those the mapping reads. "" when neither shows.
func (m *metricsSource) engine(ctx context.Context, fams []map[string]*dto.MetricFamily, at time.Duration) string {
	if eng := engineOfFamilies(fams); eng != "" || m.prom == nil {
		return eng
	}
	names, err := m.prom.FamilyNames(ctx, at, "vllm:.+|sglang:.+")
	if err != nil || len(names) == 0 {
		return ""
	}
	return strings.SplitN(names[0], ":", 2)[0]
}

// check is pre-flight's look at the source itself: nothing is read twice
// (a scraped target Prometheus also holds under the selector), and each
// fixed URL answers from one process (not a Service spreading scrapes over
// pods). The first is an error; the second is a warning, kept for the run's
// warnings. notes says where the metrics come from.
func (m *metricsSource) check(ctx context.Context, at time.Duration) (notes []string, err error) {
	notes = append(notes, m.from)
	if m.scraper != nil && m.prom != nil {
		if err := m.overlap(ctx, at); err != nil {
			return nil, err
		}
	}
	if m.scraper == nil || !m.fixed {
		return notes, nil
	}
	probe := &signal.Scraper{Targets: m.scraper.Targets, Mapping: m.mapping, Client: m.probe}
	for i := range probeScrapes {
		if _, err := probe.Scrape(ctx, at+time.Duration(i)); err != nil {
			break
		}
	}
	warns := probe.Warnings()
	m.mu.Lock()
	m.warnings = append(m.warnings, warns...)
	m.mu.Unlock()
	return append(notes, warns...), nil
}

// overlap fails when Prometheus holds, under the selector, series of a
// target that is also scraped: its instance label is the target's
// host:port, as Prometheus names what it scrapes.
func (m *metricsSource) overlap(ctx context.Context, at time.Duration) error {
	fams, _, err := m.prom.Families(ctx, at)
	if err != nil {
		return nil // Prometheus failing is reported by the scrape
	}
	instances := map[string]bool{}
	for _, mf := range fams {
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == "instance" {
					instances[lp.GetValue()] = true
				}
			}
		}
	}
	targets, err := m.scraper.List(ctx)
	if err != nil {
		return nil // a listing that fails is reported by the scrape
	}
	var twice []string
	for _, t := range targets {
		u, err := url.Parse(t)
		if err != nil || !instances[u.Host] {
			continue
		}
		twice = append(twice, fmt.Sprintf("%s (instance=%q)", transport.URL(t), u.Host))
	}
	if len(twice) > 0 {
		return fmt.Errorf("the metrics of %s are scraped and also read through Prometheus under the selector, so they would be counted twice: narrow recipe.prometheus.selector to leave them out (instance!=\"...\") or drop them from recipe.metrics", strings.Join(twice, ", "))
	}
	return nil
}
