package sim

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The simulator's series are its own counters, gauges and histograms, not
// client_golang's: they hold their values as client_golang's do (a
// counter's whole and fractional adds apart, a histogram's sum added in
// observation order, so every value read is bit for bit the one
// client_golang would hold), they are registered on the registry as
// collectors like any other, and the /metrics page reads their values
// straight from them (seriesPage) instead of through a Gather per scrape.

// seriesFamily is one metric family: name, HELP, type, label names and
// bucket bounds fixed when it is made, and its series, sorted as Gather
// sorts them. It is a prometheus.Collector.
type seriesFamily struct {
	desc   *prometheus.Desc
	name   string
	kind   dto.MetricType
	labels []string
	bounds []float64 // a histogram's upper bounds, +Inf left implicit
	header []byte    // its "# HELP" and "# TYPE" lines

	mu     sync.Mutex                   // held to add a series
	series atomic.Pointer[[]pageSeries] // replaced, never changed, when one is added
}

// pageSeries is one series of a family.
type pageSeries interface {
	prometheus.Metric
	base() *seriesBase
	// appendPage appends the series' lines; the page writer's lock is held.
	appendPage(buf []byte) []byte
}

func newSeriesFamily(kind dto.MetricType, name, help string, labels []string, bounds []float64) *seriesFamily {
	f := &seriesFamily{
		desc:   prometheus.NewDesc(name, help, labels, nil),
		name:   name,
		kind:   kind,
		labels: labels,
	}
	if kind == dto.MetricType_HISTOGRAM {
		if len(bounds) == 0 {
			bounds = prometheus.DefBuckets
		}
		for i := 1; i < len(bounds); i++ {
			if bounds[i-1] >= bounds[i] {
				panic("sim: histogram " + name + ": bucket bounds must increase")
			}
		}
		if math.IsInf(bounds[len(bounds)-1], +1) {
			bounds = bounds[:len(bounds)-1]
		}
		f.bounds = bounds
	}
	kinds := map[dto.MetricType]string{dto.MetricType_COUNTER: "counter", dto.MetricType_GAUGE: "gauge", dto.MetricType_HISTOGRAM: "histogram"}
	h := append([]byte("# HELP "), name...)
	h = append(h, ' ')
	h = appendEscaped(h, help, false)
	h = append(h, "\n# TYPE "...)
	h = append(h, name...)
	h = append(h, ' ')
	h = append(h, kinds[kind]...)
	f.header = append(h, '\n')
	f.series.Store(new([]pageSeries))
	return f
}

// Describe and Collect make a family a prometheus.Collector.
func (f *seriesFamily) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }

func (f *seriesFamily) Collect(ch chan<- prometheus.Metric) {
	for _, s := range *f.series.Load() {
		ch <- s
	}
}

// with returns the series with these label values, made on first use.
func (f *seriesFamily) with(values ...string) pageSeries {
	if len(values) != len(f.labels) {
		panic("sim: metric " + f.name + ": want label values for " + strings.Join(f.labels, ", "))
	}
	if s := find(*f.series.Load(), values); s != nil {
		return s
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := *f.series.Load()
	if s := find(old, values); s != nil {
		return s
	}
	b := seriesBase{fam: f, values: append([]string(nil), values...)}
	b.pairs = prometheus.MakeLabelPairs(f.desc, b.values)
	var s pageSeries
	switch f.kind {
	case dto.MetricType_COUNTER:
		s = &counterSeries{seriesBase: b, created: timestamppb.Now()}
	case dto.MetricType_GAUGE:
		s = &gaugeSeries{seriesBase: b}
	default:
		s = &histogramSeries{seriesBase: b, created: timestamppb.Now(), counts: make([]uint64, len(f.bounds))}
	}
	// Gather sorts a family's series by their label values, in the order of
	// the label names sorted.
	at := len(old)
	for i, o := range old {
		if pairsLess(b.pairs, o.base().pairs) {
			at = i
			break
		}
	}
	next := make([]pageSeries, 0, len(old)+1)
	next = append(append(append(next, old[:at]...), s), old[at:]...)
	f.series.Store(&next)
	return s
}

func find(ss []pageSeries, values []string) pageSeries {
	for _, s := range ss {
		if slices.Equal(s.base().values, values) {
			return s
		}
	}
	return nil
}

func pairsLess(a, b []*dto.LabelPair) bool {
	for i := range a {
		if va, vb := a[i].GetValue(), b[i].GetValue(); va != vb {
			return va < vb
		}
	}
	return false
}

// counter, gauge and histogram return a family's series by label values.
func (f *seriesFamily) counter(values ...string) *counterSeries {
	return f.with(values...).(*counterSeries)
}

func (f *seriesFamily) gauge(values ...string) *gaugeSeries { return f.with(values...).(*gaugeSeries) }

func (f *seriesFamily) histogram(values ...string) *histogramSeries {
	return f.with(values...).(*histogramSeries)
}

// WithLabelValues is prometheus.CounterVec's, for a counter family.
func (f *seriesFamily) WithLabelValues(values ...string) prometheus.Counter {
	return f.counter(values...)
}

// seriesBase is what every series has: its family, label values and
// pairs, and the text it wrote last (the page writer's lock guards text
// and the values it was written for).
type seriesBase struct {
	fam    *seriesFamily
	values []string
	pairs  []*dto.LabelPair
	prefix [][]byte // each line's text before its value, made on first use
	text   []byte
	fresh  bool // text holds the values last seen
}

func (b *seriesBase) base() *seriesBase      { return b }
func (b *seriesBase) Desc() *prometheus.Desc { return b.fam.desc }

// Describe and Collect make a series a collector of itself, as
// client_golang's are; registered alone, it must be its family's only one.
func (b *seriesBase) Describe(ch chan<- *prometheus.Desc) { ch <- b.fam.desc }

// lines makes the prefix of each line: name, suffix and labels, and a
// space.
func (b *seriesBase) lines() [][]byte {
	if b.prefix != nil {
		return b.prefix
	}
	name := b.fam.name
	if b.fam.kind != dto.MetricType_HISTOGRAM {
		b.prefix = [][]byte{appendSeriesName(nil, name, "", b.pairs, "", 0)}
		return b.prefix
	}
	for _, ub := range b.fam.bounds {
		b.prefix = append(b.prefix, appendSeriesName(nil, name, "_bucket", b.pairs, model.BucketLabel, ub))
	}
	b.prefix = append(b.prefix,
		appendSeriesName(nil, name, "_bucket", b.pairs, model.BucketLabel, math.Inf(+1)),
		appendSeriesName(nil, name, "_sum", b.pairs, "", 0),
		appendSeriesName(nil, name, "_count", b.pairs, "", 0))
	return b.prefix
}

// counterSeries is client_golang's counter: whole adds and fractional adds
// kept apart, the value their sum.
type counterSeries struct {
	seriesBase
	whole   atomic.Uint64
	frac    atomic.Uint64 // float64 bits
	created *timestamppb.Timestamp
	shown   uint64 // the bits of the value text holds
}

func (c *counterSeries) Collect(ch chan<- prometheus.Metric) { ch <- c }
func (c *counterSeries) Inc()                                { c.whole.Add(1) }

func (c *counterSeries) Add(v float64) {
	if v < 0 {
		panic("sim: counter " + c.fam.name + " cannot decrease")
	}
	if w := uint64(v); float64(w) == v {
		c.whole.Add(w)
		return
	}
	addFloat(&c.frac, v)
}

func (c *counterSeries) get() float64 {
	return math.Float64frombits(c.frac.Load()) + float64(c.whole.Load())
}

func (c *counterSeries) Write(out *dto.Metric) error {
	out.Label = c.pairs
	out.Counter = &dto.Counter{Value: new(c.get()), CreatedTimestamp: c.created}
	return nil
}

func (c *counterSeries) appendPage(buf []byte) []byte {
	v := c.get()
	if bits := math.Float64bits(v); !c.fresh || bits != c.shown {
		c.text = appendValueLine(append(c.text[:0], c.lines()[0]...), v)
		c.shown, c.fresh = bits, true
	}
	return append(buf, c.text...)
}

// gaugeSeries is client_golang's gauge.
type gaugeSeries struct {
	seriesBase
	bits  atomic.Uint64
	shown uint64
}

func (g *gaugeSeries) Collect(ch chan<- prometheus.Metric) { ch <- g }
func (g *gaugeSeries) Set(v float64)                       { g.bits.Store(math.Float64bits(v)) }
func (g *gaugeSeries) SetToCurrentTime()                   { g.Set(float64(time.Now().UnixNano()) / 1e9) }
func (g *gaugeSeries) Inc()                                { g.Add(1) }
func (g *gaugeSeries) Dec()                                { g.Add(-1) }
func (g *gaugeSeries) Add(v float64)                       { addFloat(&g.bits, v) }
func (g *gaugeSeries) Sub(v float64)                       { g.Add(v * -1) }

func (g *gaugeSeries) Write(out *dto.Metric) error {
	out.Label = g.pairs
	out.Gauge = &dto.Gauge{Value: new(math.Float64frombits(g.bits.Load()))}
	return nil
}

func (g *gaugeSeries) appendPage(buf []byte) []byte {
	if bits := g.bits.Load(); !g.fresh || bits != g.shown {
		g.text = appendValueLine(append(g.text[:0], g.lines()[0]...), math.Float64frombits(bits))
		g.shown, g.fresh = bits, true
	}
	return append(buf, g.text...)
}

// histogramSeries is client_golang's classic histogram: an observation
// counts in the first bucket whose bound is at or above it (or in none,
// above them all or NaN), and its value adds to the sum. A lock, not
// client_golang's hot and cold counts, keeps a read consistent.
type histogramSeries struct {
	seriesBase
	mu      sync.Mutex
	counts  []uint64 // per bucket, not cumulative
	count   uint64
	sum     float64
	created *timestamppb.Timestamp

	shownCount, shownSum uint64 // what text was written for (count, sum bits)
	snap                 []uint64
}

func (h *histogramSeries) Collect(ch chan<- prometheus.Metric) { ch <- h }

func (h *histogramSeries) Observe(v float64) {
	i := findBucket(h.fam.bounds, v)
	h.mu.Lock()
	if i < len(h.counts) {
		h.counts[i]++
	}
	h.sum += v
	h.count++
	h.mu.Unlock()
}

// findBucket is client_golang's: the first bound at or above v, or
// len(bounds).
func findBucket(bounds []float64, v float64) int {
	for i, b := range bounds {
		if v <= b {
			return i
		}
	}
	return len(bounds)
}

// read copies the counts into snap and returns the count and sum.
func (h *histogramSeries) read(snap []uint64) (uint64, float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	copy(snap, h.counts)
	return h.count, h.sum
}

func (h *histogramSeries) Write(out *dto.Metric) error {
	snap := make([]uint64, len(h.counts))
	count, sum := h.read(snap)
	his := &dto.Histogram{
		Bucket:           make([]*dto.Bucket, len(snap)),
		SampleCount:      new(count),
		SampleSum:        new(sum),
		CreatedTimestamp: h.created,
	}
	var cum uint64
	for i, n := range snap {
		cum += n
		his.Bucket[i] = &dto.Bucket{CumulativeCount: new(cum), UpperBound: new(h.fam.bounds[i])}
	}
	out.Label = h.pairs
	out.Histogram = his
	return nil
}

func (h *histogramSeries) appendPage(buf []byte) []byte {
	h.mu.Lock()
	count, sumBits := h.count, math.Float64bits(h.sum)
	// An observation always adds one to count, so the same count is the
	// same counts and sum.
	if h.fresh && count == h.shownCount && sumBits == h.shownSum {
		h.mu.Unlock()
		return append(buf, h.text...)
	}
	if h.snap == nil {
		h.snap = make([]uint64, len(h.counts))
	}
	copy(h.snap, h.counts)
	h.mu.Unlock()
	lines := h.lines()
	t := h.text[:0]
	var cum uint64
	for i, n := range h.snap {
		cum += n
		t = appendCountLine(append(t, lines[i]...), cum)
	}
	n := len(h.snap)
	t = appendCountLine(append(t, lines[n]...), count)
	t = appendValueLine(append(t, lines[n+1]...), math.Float64frombits(sumBits))
	t = appendCountLine(append(t, lines[n+2]...), count)
	h.text, h.shownCount, h.shownSum, h.fresh = t, count, sumBits, true
	return append(buf, t...)
}

// addFloat adds v to the float64 whose bits p holds.
func addFloat(p *atomic.Uint64, v float64) {
	for {
		old := p.Load()
		if p.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func appendValueLine(buf []byte, v float64) []byte { return append(appendFloat(buf, v), '\n') }

func appendCountLine(buf []byte, n uint64) []byte { return append(appendCount(buf, n), '\n') }

// appendCount is appendFloat(buf, float64(n)): 'g' writes a whole number
// below 1e6 in plain digits (and the rest with an exponent).
func appendCount(buf []byte, n uint64) []byte {
	if n < 1e6 {
		return strconv.AppendUint(buf, n, 10)
	}
	return appendFloat(buf, float64(n))
}
