package sim

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkMetricsPage serves a fed vLLM registry's /metrics page, with a
// few observations between scrapes as in a run.
func BenchmarkMetricsPage(b *testing.B) {
	m := fedMetrics(newMetrics)
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	for i := range b.N {
		m.ttft.Observe(float64(i%7) * 0.3)
		m.itl.Observe(0.021)
		m.e2e.Observe(float64(i % 50))
		m.running.Set(float64(i % 5))
		m.generationTokens.Add(37)
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
