package sim

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkMetricsPage serves a fed vLLM registry's /metrics page with
// every histogram, most counters and a gauge moved between scrapes, as
// under load.
func BenchmarkMetricsPage(b *testing.B) {
	m := fedMetrics(newMetrics)
	hists := []prometheus.Observer{m.ttft, m.itl, m.tpot, m.e2e, m.queue, m.inference, m.prefill, m.decode, m.promptHist, m.generationHist, m.maxTokensReq, m.iterationTokens, m.apiTTFT}
	counters := []prometheus.Counter{m.prefixQueries, m.prefixHits, m.promptTokens, m.generationTokens, m.promptCached, m.iterations, m.success[finishStop], m.promptBySource[sourceCacheHit]}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	for i := range b.N {
		for j, o := range hists {
			o.Observe(float64(i%7)*0.3 + float64(j)*1.7)
		}
		for _, c := range counters {
			c.Add(37)
		}
		m.running.Set(float64(i % 5))
		clear(w.h)
		m.serve(w, req, nil)
	}
	b.ReportMetric(float64(w.n)/float64(b.N), "page-bytes")
}

// discard is a ResponseWriter that keeps only the headers and a byte count.
type discard struct {
	h http.Header
	n int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }
func (d *discard) WriteHeader(int)             {}
