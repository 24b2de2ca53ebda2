package sim

import (
	"bytes"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// fedMetrics is a personality's registry with every series fed.
func fedMetrics(newM func(Profile) *metrics) *metrics {
	m := newM(tinyProfile())
	for i := range 50 {
		v := float64(i) * 0.037
		for _, o := range []prometheus.Observer{m.ttft, m.itl, m.tpot, m.e2e, m.queue, m.inference, m.prefill, m.decode, m.queueAtAdmit, m.promptHist, m.generationHist, m.maxTokensReq, m.iterationTokens, m.retractions, m.apiTTFT} {
			o.Observe(v * float64(i))
		}
		for _, c := range []prometheus.Counter{m.prefixQueries, m.prefixHits, m.preemptions, m.promptTokens, m.generationTokens, m.promptCached, m.promptTokensDone, m.generationTokensDone, m.cachedTokensDone, m.iterations, m.success[finishStop], m.success[finishAbort], m.promptBySource[sourceCacheHit]} {
			c.Add(v)
		}
	}
	m.running.Set(3)
	m.kvUsage.Set(0.4375)
	m.lag.Set(1e-9)
	m.http.WithLabelValues("/v1/chat/completions", "POST", "2xx").Add(12)
	m.http.WithLabelValues("/v1/models", "GET", "4xx").Inc()
	return m
}

// oddCollector yields a sample with a timestamp.
type oddCollector struct{ desc *prometheus.Desc }

func (c oddCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c oddCollector) Collect(ch chan<- prometheus.Metric) {
	m := prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 2.5, "x")
	ch <- prometheus.NewMetricWithTimestamp(time.UnixMilli(1700000000123), m)
}

// oddRegistry holds what a simulator never exposes but the text format
// must get right: escapes, special values, summaries, untyped series,
// timestamps, and names promhttp quotes or escapes (left to it).
func oddRegistry(withOddNames bool) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "odd:gauge", Help: "back\\slash and\nnewline \"quoted\""}, []string{"v"})
	reg.MustRegister(g)
	for i, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, 1, 0, math.Copysign(0, -1), 1e-300, 123456789012, 0.1 + 0.2, -2.5e21} {
		g.WithLabelValues(strings.Repeat(`a"b\c`+"\n", i%3) + string(rune('a'+i)) + "é").Set(f)
	}
	s := prometheus.NewSummary(prometheus.SummaryOpts{Name: "odd_summary", Help: "s", Objectives: map[float64]float64{0.5: 0.05, 0.99: 0.001}})
	reg.MustRegister(s)
	for i := range 20 {
		s.Observe(float64(i))
	}
	reg.MustRegister(prometheus.NewUntypedFunc(prometheus.UntypedOpts{Name: "odd_untyped", Help: ""}, func() float64 { return 7 }))
	reg.MustRegister(oddCollector{prometheus.NewDesc("odd_stamped", "with a timestamp", []string{"l"}, nil)})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "odd_hist", Buckets: []float64{-1, 0, 0.5, 1, 1e9, math.Inf(1)}})
	reg.MustRegister(h)
	h.Observe(0.3)
	if withOddNames {
		reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "odd.dotted", Help: "a name promhttp quotes"}))
	}
	return reg
}

// TestTextPageMatchesPromhttp checks the page writer against the promhttp
// handler it replaces: the same status, headers and bytes for every
// personality's registry (with families hidden or not) and for one holding
// every odd case of the text format; the families the simulator serves
// must take the fast path, and its text must parse.
func TestTextPageMatchesPromhttp(t *testing.T) {
	vllm, sglang := fedMetrics(newMetrics), fedMetrics(newSGLangMetrics)
	hide := map[string]bool{"vllm:num_requests_running": true, "vllm:time_to_first_token_seconds": true}
	regs := []struct {
		name string
		g    prometheus.Gatherer
		fast bool
	}{
		{"vllm", vllm.reg, true},
		{"sglang", sglang.reg, true},
		{"odd", oddRegistry(false), true},
		{"odd names", oddRegistry(true), false},
	}
	accepts := []http.Header{
		{"Accept": {"text/plain;version=0.0.4"}},
		{},
		{"Accept": {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"}},
		{"Accept": {"text/plain;version=0.0.4"}, "Accept-Encoding": {"gzip"}},
	}
	for _, rc := range regs {
		fams, err := rc.g.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := appendText(nil, fams); ok != rc.fast {
			t.Errorf("%s: fast path %v, want %v", rc.name, ok, rc.fast)
		}
		for _, f := range fams {
			var want bytes.Buffer
			if _, err := expfmt.MetricFamilyToText(&want, f); err != nil {
				t.Fatal(err)
			}
			if got, ok := appendFamily(nil, f); ok && string(got) != want.String() {
				t.Errorf("%s: family %s:\n got %q\nwant %q", rc.name, f.GetName(), got, want.String())
			}
		}
		for _, h := range accepts {
			var pw pageWriter
			for range 2 { // the second page reuses the first's buffer
				want := httptest.NewRecorder()
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				req.Header = h
				promhttp.HandlerFor(rc.g, promhttp.HandlerOpts{}).ServeHTTP(want, req)
				got := httptest.NewRecorder()
				pw.serve(got, req, rc.g)
				if got.Code != want.Code || !equalHeaders(got.Header(), want.Header()) || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
					t.Fatalf("%s, request headers %v: got %d %v\n%s\nwant %d %v\n%s", rc.name, h, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
				}
			}
		}
	}
	// The simulator's own path: its series written straight, all families
	// or some hidden, scrape after scrape as the values move (or not).
	for _, m := range []*metrics{vllm, sglang} {
		if _, own := m.reg.own(); !own {
			t.Fatal("a personality's registry holds collectors that are not the simulator's")
		}
		for round := range 4 {
			for _, hidden := range []map[string]bool{nil, hide, {"sglang:token_usage": true, "sglang:num_retractions": true}} {
				for _, h := range accepts {
					req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
					req.Header = h
					want := httptest.NewRecorder()
					promhttp.HandlerFor(hiding(m.reg, hidden), promhttp.HandlerOpts{}).ServeHTTP(want, req)
					got := httptest.NewRecorder()
					m.serve(got, req, hidden)
					if got.Code != want.Code || !equalHeaders(got.Header(), want.Header()) || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
						t.Fatalf("round %d, hiding %v, request headers %v: got %d %v\n%s\nwant %d %v\n%s", round, hidden, h, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
					}
					if h.Get("Accept-Encoding") != "" || strings.Contains(h.Get("Accept"), "protobuf") {
						continue
					}
					for name := range hidden {
						if strings.Contains(got.Body.String(), name+" ") {
							t.Fatalf("hidden family %s served", name)
						}
					}
					parser := expfmt.NewTextParser(model.LegacyValidation)
					if _, err := parser.TextToMetricFamilies(bytes.NewReader(got.Body.Bytes())); err != nil {
						t.Fatalf("the page does not parse: %v", err)
					}
				}
			}
			switch round { // round 2 changes nothing
			case 0:
				m.ttft.Observe(0.7)
				m.itl.Observe(1e9)
				m.e2e.Observe(math.NaN())
				m.running.Set(4)
				m.success[finishAbort].Add(0.5)
				m.iterationTokens.Observe(3)
			case 1:
				m.http.WithLabelValues("/v1/chat/completions", "POST", "5xx").Inc()
				m.http.WithLabelValues("/health", "GET", "2xx").Inc()
				m.waiting.Add(2.25)
				for range 1_000_001 {
					m.kvUsage.Set(0) // a gauge set back to what it was
					m.queueAtAdmit.Observe(12)
				}
				m.kvUsage.Set(0.4375)
			}
		}
	}
	// A collector that is not the simulator's sends the page through promhttp.
	m := fedMetrics(newMetrics)
	m.reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "aaa_foreign", Help: "not the simulator's"}))
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	got := httptest.NewRecorder()
	m.serve(got, req, nil)
	if !strings.Contains(got.Body.String(), "aaa_foreign 0\n") {
		t.Fatalf("a foreign collector's family is not served:\n%s", got.Body)
	}
}

// hiding is reg less the families named in hide.
func hiding(reg prometheus.Gatherer, hide map[string]bool) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		fams, err := reg.Gather()
		out := fams[:0]
		for _, f := range fams {
			if !hide[f.GetName()] {
				out = append(out, f)
			}
		}
		return out, err
	})
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, "\x00") != strings.Join(b[k], "\x00") {
			return false
		}
	}
	return true
}

// TestMetricsPageOverHTTP scrapes the simulator's page over loopback HTTP
// as a scraper would, compressed (promhttp's path) and not (the page
// writer's own): the same page both ways.
func TestMetricsPageOverHTTP(t *testing.T) {
	m := fedMetrics(newMetrics)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, nil) }))
	defer srv.Close()
	get := func(compress bool) []byte {
		t.Helper()
		c := &http.Client{Transport: &http.Transport{DisableCompression: !compress}, Timeout: 5 * time.Second}
		defer c.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		req.Header.Set("Accept", "text/plain;version=0.0.4")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if compress != resp.Uncompressed {
			t.Fatalf("compressed %v: the response came uncompressed %v", compress, resp.Uncompressed)
		}
		var b bytes.Buffer
		if _, err := b.ReadFrom(resp.Body); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	for range 2 {
		plain, gzipped := get(false), get(true)
		if !bytes.Equal(plain, gzipped) || !strings.Contains(string(plain), "vllm:time_to_first_token_seconds_bucket{") {
			t.Fatalf("over HTTP, uncompressed:\n%s\ncompressed:\n%s", plain, gzipped)
		}
		m.ttft.Observe(0.3)
	}
}
