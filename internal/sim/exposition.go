package sim

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The /metrics page is asked for every scrape, and promhttp's text encoder
// (a writer call per name, label, escape and number, each through a
// strings.Replacer or a pooled buffer) was the largest cost of serving it.
// appendText writes the same text, byte for byte
// (TestTextPageMatchesPromhttp), by appending to one buffer; whatever it
// does not handle exactly the same way (names outside the classic
// character set, which promhttp would escape or quote; empty families;
// negotiated formats other than the classic text; compression; the name[]
// filter) goes to promhttp.

// pageWriter serves metrics pages, keeping its buffers between scrapes.
// The zero value is ready to use.
type pageWriter struct {
	bufs sync.Pool
	mu   sync.Mutex // held to write the simulator's own series (seriesPage)
	last atomic.Pointer[negotiated]
}

// negotiated is the format an Accept header and escaping scheme got.
type negotiated struct {
	accept string
	scheme model.EscapingScheme
	format expfmt.Format
}

// plainText returns the format promhttp would answer r in, and whether it
// is the classic text, uncompressed and unfiltered: the one pageWriter
// writes itself. The format is negotiated again only when the Accept
// header (or the escaping scheme) is not the last one's: a scraper sends
// the same header every time.
func (pw *pageWriter) plainText(r *http.Request) (expfmt.Format, bool) {
	accept, scheme := r.Header.Get("Accept"), model.NameEscapingScheme
	n := pw.last.Load()
	if n == nil || n.accept != accept || n.scheme != scheme {
		n = &negotiated{accept, scheme, expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)}
		pw.last.Store(n)
	}
	return n.format, n.format.FormatType() == expfmt.TypeTextPlain && r.Header.Get("Accept-Encoding") == "" && (r.URL == nil || r.URL.RawQuery == "")
}

// serve serves g's families as promhttp.HandlerFor(g, HandlerOpts{}) does.
func (pw *pageWriter) serve(w http.ResponseWriter, r *http.Request, g prometheus.Gatherer) {
	format, ok := pw.plainText(r)
	if !ok {
		promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(w, r)
		return
	}
	fams, err := g.Gather()
	if err != nil {
		promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(w, r)
		return
	}
	bp := pw.buffer()
	defer pw.bufs.Put(bp)
	page, ok := appendText((*bp)[:0], fams)
	*bp = page[:0]
	if !ok {
		promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(w, r)
		return
	}
	writePage(w, format, page)
}

func (pw *pageWriter) buffer() *[]byte {
	bp, _ := pw.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	return bp
}

// writePage writes a page in format with promhttp's headers.
func writePage(w http.ResponseWriter, format expfmt.Format, page []byte) {
	h := w.Header()
	h["Vary"] = append(h["Vary"], "Accept", "Accept-Encoding") // two Adds
	h.Set("Content-Type", string(format))
	_, _ = w.Write(page)
}

// appendText appends fams in the classic text format as
// expfmt.MetricFamilyToText writes them; ok is false (and buf is to be
// dropped) for a family it leaves to expfmt.
func appendText(buf []byte, fams []*dto.MetricFamily) (_ []byte, ok bool) {
	for _, f := range fams {
		if buf, ok = appendFamily(buf, f); !ok {
			return buf, false
		}
	}
	return buf, true
}

func appendFamily(buf []byte, f *dto.MetricFamily) ([]byte, bool) {
	name := f.GetName()
	if len(f.Metric) == 0 || !classicName(name) {
		return buf, false
	}
	var kind string
	switch f.GetType() {
	case dto.MetricType_COUNTER:
		kind = "counter"
	case dto.MetricType_GAUGE:
		kind = "gauge"
	case dto.MetricType_UNTYPED:
		kind = "untyped"
	case dto.MetricType_SUMMARY:
		kind = "summary"
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		kind = "histogram"
	default:
		return buf, false
	}
	if f.Help != nil {
		buf = append(buf, "# HELP "...)
		buf = append(buf, name...)
		buf = append(buf, ' ')
		buf = appendEscaped(buf, *f.Help, false)
		buf = append(buf, '\n')
	}
	buf = append(buf, "# TYPE "...)
	buf = append(buf, name...)
	buf = append(buf, ' ')
	buf = append(buf, kind...)
	buf = append(buf, '\n')
	for _, m := range f.Metric {
		for _, lp := range m.Label {
			if !classicName(lp.GetName()) || lp.GetName() == model.MetricNameLabel {
				return buf, false
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			if m.Counter == nil {
				return buf, false
			}
			buf = appendSample(buf, name, "", m, "", 0, m.Counter.GetValue())
		case dto.MetricType_GAUGE:
			if m.Gauge == nil {
				return buf, false
			}
			buf = appendSample(buf, name, "", m, "", 0, m.Gauge.GetValue())
		case dto.MetricType_UNTYPED:
			if m.Untyped == nil {
				return buf, false
			}
			buf = appendSample(buf, name, "", m, "", 0, m.Untyped.GetValue())
		case dto.MetricType_SUMMARY:
			if m.Summary == nil {
				return buf, false
			}
			for _, q := range m.Summary.Quantile {
				buf = appendSample(buf, name, "", m, model.QuantileLabel, q.GetQuantile(), q.GetValue())
			}
			buf = appendSample(buf, name, "_sum", m, "", 0, m.Summary.GetSampleSum())
			buf = appendSample(buf, name, "_count", m, "", 0, float64(m.Summary.GetSampleCount()))
		default:
			h := m.Histogram
			if h == nil {
				return buf, false
			}
			infSeen := false
			for _, b := range h.Bucket {
				v := b.GetCumulativeCountFloat()
				if v == 0 {
					v = float64(b.GetCumulativeCount())
				}
				buf = appendSample(buf, name, "_bucket", m, model.BucketLabel, b.GetUpperBound(), v)
				if math.IsInf(b.GetUpperBound(), +1) {
					infSeen = true
				}
			}
			count := h.GetSampleCountFloat()
			if count == 0 {
				count = float64(h.GetSampleCount())
			}
			if !infSeen {
				buf = appendSample(buf, name, "_bucket", m, model.BucketLabel, math.Inf(+1), count)
			}
			buf = appendSample(buf, name, "_sum", m, "", 0, h.GetSampleSum())
			buf = appendSample(buf, name, "_count", m, "", 0, count)
		}
	}
	return buf, true
}

// appendSample is expfmt's writeSample: name and suffix, the labels plus
// extra (when named) with the value extraValue, the value, the timestamp.
func appendSample(buf []byte, name, suffix string, m *dto.Metric, extra string, extraValue, v float64) []byte {
	buf = appendSeriesName(buf, name, suffix, m.Label, extra, extraValue)
	buf = appendFloat(buf, v)
	if m.TimestampMs != nil {
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, *m.TimestampMs, 10)
	}
	return append(buf, '\n')
}

// appendSeriesName is a sample line up to its value: name and suffix, the
// labels plus extra (when named) with the value extraValue, a space.
func appendSeriesName(buf []byte, name, suffix string, labels []*dto.LabelPair, extra string, extraValue float64) []byte {
	buf = append(buf, name...)
	buf = append(buf, suffix...)
	if len(labels) > 0 || extra != "" {
		sep := byte('{')
		for _, lp := range labels {
			buf = append(buf, sep)
			buf = append(buf, lp.GetName()...)
			buf = append(buf, `="`...)
			buf = appendEscaped(buf, lp.GetValue(), true)
			buf = append(buf, '"')
			sep = ','
		}
		if extra != "" {
			buf = append(buf, sep)
			buf = append(buf, extra...)
			buf = append(buf, `="`...)
			buf = appendFloat(buf, extraValue)
			buf = append(buf, '"')
		}
		buf = append(buf, '}')
	}
	return append(buf, ' ')
}

// appendFloat is expfmt's writeFloat.
func appendFloat(buf []byte, f float64) []byte {
	switch {
	case f == 1:
		return append(buf, '1')
	case f == 0:
		return append(buf, '0')
	case f == -1:
		return append(buf, "-1"...)
	case math.IsNaN(f):
		return append(buf, "NaN"...)
	case math.IsInf(f, +1):
		return append(buf, "+Inf"...)
	case math.IsInf(f, -1):
		return append(buf, "-Inf"...)
	}
	return strconv.AppendFloat(buf, f, 'g', -1, 64)
}

// appendEscaped is expfmt's writeEscapedString: backslash and newline
// escaped, and the double quote too in a label value.
func appendEscaped(buf []byte, s string, quote bool) []byte {
	special := "\\\n"
	if quote {
		special = "\\\n\""
	}
	if !strings.ContainsAny(s, special) {
		return append(buf, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			buf = append(buf, `\\`...)
		case c == '\n':
			buf = append(buf, `\n`...)
		case c == '"' && quote:
			buf = append(buf, `\"`...)
		default:
			buf = append(buf, c)
		}
	}
	return buf
}

// classicName reports whether expfmt writes a metric or label name as it
// is (no quotes, no escaping under any scheme).
func classicName(name string) bool { return model.IsValidLegacyMetricName(name) }
