package sim

import (
	"bytes"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestSeriesHoldWhatClientGolangHolds feeds the simulator's series and
// client_golang's the same adds, sets and observations (gathered between
// them, as scrapes would) and checks that both registries give the same
// page: the values the simulator serves are bit for bit the ones it served
// on client_golang's series.
func TestSeriesHoldWhatClientGolangHolds(t *testing.T) {
	ours, theirs := newSimRegistry(), prometheus.NewRegistry()
	labels := []string{"model_name", "engine"}
	oc := newSeriesFamily(dto.MetricType_COUNTER, "c_total", "a counter", labels, nil)
	og := newSeriesFamily(dto.MetricType_GAUGE, "g", "a gauge", labels, nil)
	oh := newSeriesFamily(dto.MetricType_HISTOGRAM, "h", "few buckets", labels, ttftBuckets)
	ol := newSeriesFamily(dto.MetricType_HISTOGRAM, "l", "many buckets", labels, append(append([]float64{}, sglangQueueBuckets...), math.Inf(1)))
	ours.MustRegister(oc, og, oh, ol)
	tc := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "a counter"}, labels)
	tg := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "g", Help: "a gauge"}, labels)
	th := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Help: "few buckets", Buckets: ttftBuckets}, labels)
	tl := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "l", Help: "many buckets", Buckets: append(append([]float64{}, sglangQueueBuckets...), math.Inf(1))}, labels)
	theirs.MustRegister(tc, tg, th, tl)

	values := []float64{0.1, 1, 0.2, 3, 1e-9, 2.5, 0, 17, 0.3, 1e6, 0.7, 4096, 1e-300, 7}
	obs := append([]float64{math.Inf(1), math.Inf(-1), -3, 400, 3000, 3001}, values...)
	for round := range 40 {
		for i, v := range values {
			vals := []string{"m", strconv.Itoa((round + i) % 3)}
			oc.counter(vals...).Add(v)
			tc.WithLabelValues(vals...).Add(v)
			og.gauge(vals...).Add(v - 0.5)
			tg.WithLabelValues(vals...).Add(v - 0.5)
			if i%5 == 0 {
				og.gauge(vals...).Inc()
				tg.WithLabelValues(vals...).Inc()
				og.gauge(vals...).Sub(v)
				tg.WithLabelValues(vals...).Sub(v)
			}
		}
		for i, v := range obs {
			vals := []string{"m", strconv.Itoa((round * i) % 4)}
			oh.histogram(vals...).Observe(v * float64(round))
			th.WithLabelValues(vals...).Observe(v * float64(round))
			ol.histogram(vals...).Observe(v * float64(round))
			tl.WithLabelValues(vals...).Observe(v * float64(round))
		}
		if round == 7 {
			oh.histogram("m", "0").Observe(math.NaN())
			th.WithLabelValues("m", "0").Observe(math.NaN())
		}
		if got, want := pageOf(t, ours), pageOf(t, theirs); !bytes.Equal(got, want) {
			t.Fatalf("round %d: the simulator's series give\n%s\nclient_golang's give\n%s", round, got, want)
		}
	}
}

func pageOf(t *testing.T, g prometheus.Gatherer) []byte {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// TestAppendCount checks the whole-number writer against appendFloat.
func TestAppendCount(t *testing.T) {
	for _, n := range []uint64{0, 1, 2, 9, 10, 99, 12345, 999_999, 1_000_000, 1_000_001, 1_234_567, 1 << 53, 1<<53 + 1, math.MaxUint64} {
		if got, want := appendCount(nil, n), appendFloat(nil, float64(n)); !bytes.Equal(got, want) {
			t.Errorf("appendCount(%d) = %s, want %s", n, got, want)
		}
	}
}

// TestSeriesPageWhileFed scrapes the page while other goroutines feed the
// series and add label sets (as the engine and the API handlers do on a
// wall clock): every page parses and holds each histogram whole (its +Inf
// bucket is its count, its buckets never fall).
func TestSeriesPageWhileFed(t *testing.T) {
	m := fedMetrics(newMetrics)
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for i := range 3000 {
				m.ttft.Observe(float64(i%900) * 0.01)
				m.itl.Observe(0.02)
				m.generationTokens.Add(1.5)
				m.running.Add(1)
				m.http.WithLabelValues("/v1/chat/completions", "POST", []string{"2xx", "4xx", "5xx"}[(i+g)%3]).Inc()
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 100 {
				rec := httptest.NewRecorder()
				m.serve(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil), nil)
				parser := expfmt.NewTextParser(model.LegacyValidation)
				fams, err := parser.TextToMetricFamilies(rec.Body)
				if err != nil {
					t.Error(err)
					return
				}
				for name, f := range fams {
					for _, s := range f.GetMetric() {
						h := s.GetHistogram()
						if h == nil {
							continue
						}
						var last uint64
						for _, b := range h.GetBucket() {
							if b.GetCumulativeCount() < last {
								t.Errorf("%s: bucket le=%g falls to %d", name, b.GetUpperBound(), b.GetCumulativeCount())
							}
							last = b.GetCumulativeCount()
						}
						if last != h.GetSampleCount() {
							t.Errorf("%s: +Inf bucket %d, count %d", name, last, h.GetSampleCount())
						}
					}
				}
			}
		})
	}
	wg.Wait()
}
