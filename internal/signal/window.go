package signal

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/headroom-bench/headroom/internal/stats"
)

// GaugeStat summarises a gauge over the samples taken inside a window.
type GaugeStat struct {
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
	Last float64 `json:"last"`
	N    int     `json:"n"`
}

// Window is what happened between two samples: histogram bucket deltas and
// counter deltas, and gauge statistics from the samples inside it.
type Window struct {
	Start    time.Duration              `json:"start"`
	End      time.Duration              `json:"end"`
	Hist     map[string]stats.Histogram `json:"hist"`
	Counter  map[string]float64         `json:"counter"`
	Gauge    map[string]GaugeStat       `json:"gauge"`
	Warnings []string                   `json:"warnings,omitempty"`
}

// Windows cuts [start, end) into consecutive windows of width (a last window
// shorter than width/2 is merged into the one before it) and takes deltas of
// counters and histograms between the samples closest to each edge. A
// window's Start and End are those samples' times (within a quarter of the
// width of the nominal edge; the nominal edge otherwise): samples on the
// scrape grid keep the nominal edges, and a source whose samples are the
// server's state at other times (Prometheus' scrapes) gets windows over the
// span its counts cover. Neighbouring windows share their edge sample, so
// they still tile. Samples must be sorted by At.
//
// Deltas are taken per part (one engine copy or rank of one target, see
// Sample.Parts) and then summed, chaining over every sample between the
// edges that has the part:
//   - a part whose value goes down between two samples was reset (a restart
//     of that copy): its delta restarts from zero there, for that part only,
//     even when other copies' growth hides the drop in the sum; a warning
//     names the part;
//   - a part missing from the sample at an edge (its target failed that
//     scrape) takes its edge from the nearest sample that has it, ties to the
//     earlier, so neighbouring windows still share edges and nothing is
//     counted twice; a warning names the part and the scrape used;
//   - a part first seen after the first sample, when the sample before it
//     had no failed targets, counts from zero in that sample (a label set
//     created on first use, such as the first 5xx, counts in full).
//
// A counter present in both edge samples with no parts (a family exposed with
// no matching series yet) has a delta of zero. A histogram whose buckets
// changed within the window is left out, with a warning. Gauge statistics
// come from the samples inside the window.
func Windows(samples []Sample, start, end, width time.Duration) []Window {
	if len(samples) == 0 || end <= start {
		return nil
	}
	edges := cutEdges(start, end, width)
	out := make([]Window, 0, len(edges)-1)
	for i := 0; i+1 < len(edges); i++ {
		out = append(out, window(samples, edges[i], edges[i+1], i+2 == len(edges)))
	}
	return out
}

// cutEdges returns the window edges from start to end.
func cutEdges(start, end, width time.Duration) []time.Duration {
	if width <= 0 || end-start <= width {
		return []time.Duration{start, end}
	}
	edges := []time.Duration{start}
	for t := start + width; t < end; t += width {
		edges = append(edges, t)
	}
	if last := edges[len(edges)-1]; end-last < width/2 && len(edges) > 1 {
		edges = edges[:len(edges)-1]
	}
	return append(edges, end)
}

// edgeAt is a window's edge: the time of the sample read for it, when that
// is within tolerance of the nominal edge, else the nominal edge (the
// sample is too far to say where the window ends, and a warning says so).
func edgeAt(edge, sampled, tolerance time.Duration) time.Duration {
	if d := sampled - edge; d > tolerance || -d > tolerance {
		return edge
	}
	return sampled
}

// closest returns the index of the sample taken closest to t.
func closest(samples []Sample, t time.Duration) int {
	i := sort.Search(len(samples), func(i int) bool { return samples[i].At >= t })
	switch {
	case i == len(samples):
		return i - 1
	case i > 0 && t-samples[i-1].At <= samples[i].At-t:
		return i - 1
	}
	return i
}

func window(samples []Sample, start, end time.Duration, last bool) Window {
	w := Window{Start: start, End: end, Hist: map[string]stats.Histogram{}, Counter: map[string]float64{}, Gauge: map[string]GaugeStat{}}
	warn := func(format string, args ...any) { w.Warnings = append(w.Warnings, fmt.Sprintf(format, args...)) }
	i0, i1 := closest(samples, start), closest(samples, end)
	a, b := samples[i0], samples[i1]
	tolerance := (end - start) / 4
	if i0 != i1 {
		// the window spans the scrapes at its edges: a source that reads
		// the server at times of its own near the edges (Prometheus, its
		// scrape nearest each) gives the server's counts over that span,
		// and what the client saw is counted over the same span
		w.Start, w.End = edgeAt(start, a.At, tolerance), edgeAt(end, b.At, tolerance)
	}
	for _, e := range []struct {
		edge time.Duration
		s    Sample
	}{{start, a}, {end, b}} {
		if d := e.s.At - e.edge; d > tolerance || -d > tolerance {
			warn("no scrape near the edge at %v: used the one at %v", e.edge, e.s.At)
		}
		if len(e.s.Errors) > 0 {
			warn("scrape at %v missed targets (%v): their series take deltas across the scrapes that have them", e.s.At, e.s.Errors)
		}
	}
	if i0 == i1 {
		warn("window [%v, %v) has the same scrape at both edges: no deltas (scrape more often than the window width)", start, end)
	} else {
		d := deltas{samples: samples, start: start, end: end, i0: i0, i1: i1, notes: map[string][]string{}}
		for _, name := range d.names(false) {
			if v, ok := d.counter(name); ok {
				w.Counter[name] = v
			}
		}
		for _, name := range d.names(true) {
			if h, ok := d.hist(name); ok {
				w.Hist[name] = h
			}
		}
		for note, names := range d.notes {
			slices.Sort(names)
			warn("%s %s", strings.Join(slices.Compact(names), ", "), note)
		}
	}
	for _, s := range samples {
		if s.At < w.Start || s.At > w.End || (s.At == w.End && !last) {
			continue
		}
		for name, v := range s.Gauge {
			g := w.Gauge[name]
			if g.N == 0 {
				g.Max = math.Inf(-1)
			}
			g.Mean += v // a sum until the end of the loop
			g.Max = math.Max(g.Max, v)
			g.Last = v
			g.N++
			w.Gauge[name] = g
		}
	}
	for name, g := range w.Gauge {
		g.Mean /= float64(g.N)
		w.Gauge[name] = g
	}
	slices.Sort(w.Warnings)
	return w
}

// deltas takes one window's per-part deltas.
type deltas struct {
	samples    []Sample
	start, end time.Duration
	i0, i1     int                 // the samples closest to the edges
	notes      map[string][]string // warning text -> the signals it applies to
	// bad is set when a part of the series being summed shrank or moved
	// by a fraction: the series is left out of the window
	bad bool
}

// names lists the counters (or histograms) seen in the samples from edge to edge.
func (d *deltas) names(hist bool) []string {
	seen := map[string]bool{}
	for k := d.i0; k <= d.i1; k++ {
		s := &d.samples[k]
		if hist {
			for name := range s.Hist {
				seen[name] = true
			}
		} else {
			for name := range s.Counter {
				seen[name] = true
			}
		}
	}
	return sortedKeys(seen)
}

// parts lists the parts holding name in the samples from edge to edge; a
// sample without parts holds its sums as the part "".
func (d *deltas) parts(name string, hist bool) []string {
	seen := map[string]bool{}
	for k := d.i0; k <= d.i1; k++ {
		s := &d.samples[k]
		if s.Parts == nil {
			if _, ok := vec(s, "", name, hist); ok {
				seen[""] = true
			}
			continue
		}
		for key, p := range s.Parts {
			var ok bool
			if hist {
				_, ok = p.Hist[name]
			} else {
				_, ok = p.Counter[name]
			}
			if ok {
				seen[key] = true
			}
		}
	}
	return sortedKeys(seen)
}

// vec returns the raw values of name in part p of s: a counter's value, or a
// histogram's cumulative counts followed by its count and its sum.
func vec(s *Sample, p, name string, hist bool) ([]float64, bool) {
	if s.Parts == nil {
		if p != "" {
			return nil, false
		}
		if hist {
			h, ok := s.Hist[name]
			if !ok {
				return nil, false
			}
			return append(slices.Clone(h.Cumulative), h.Count, h.Sum), true
		}
		v, ok := s.Counter[name]
		return []float64{v}, ok
	}
	part, ok := s.Parts[p]
	if !ok {
		return nil, false
	}
	if hist {
		h, ok := part.Hist[name]
		if !ok {
			return nil, false
		}
		return append(slices.Clone(h.Cumulative), h.Count, float64(h.Sum)), true
	}
	v, ok := part.Counter[name]
	return []float64{v}, ok
}

// nearest returns the index of the sample closest to t for which held is
// true, ties to the earlier, or -1.
func (d *deltas) nearest(t time.Duration, held func(k int) bool) int {
	i := sort.Search(len(d.samples), func(i int) bool { return d.samples[i].At >= t })
	l, r := i-1, i
	for l >= 0 || r < len(d.samples) {
		if l >= 0 && (r >= len(d.samples) || t-d.samples[l].At <= d.samples[r].At-t) {
			if held(l) {
				return l
			}
			l--
			continue
		}
		if held(r) {
			return r
		}
		r++
	}
	return -1
}

// partDelta chains the deltas of one part over the samples that hold it
// between its edges, restarting from zero where it went down. ok is false
// when the part gives nothing in this window.
func (d *deltas) partDelta(p, name string, hist bool) (delta []float64, ok bool) {
	note := func(format string, args ...any) {
		text := fmt.Sprintf(format, args...)
		if p != "" {
			text = "in " + p + ": " + text
		}
		d.notes[text] = append(d.notes[text], name)
	}
	first := -1
	for k := range d.samples {
		if _, held := vec(&d.samples[k], p, name, hist); held {
			first = k
			break
		}
	}
	if first < 0 {
		return nil, false
	}
	// A series first seen after the first scrape, when the scrape before it
	// went through, did not exist then: it is taken as zero in that scrape (a
	// label set created on first use, such as the first 5xx, counts in full).
	zero := -1
	if first > 0 {
		if len(d.samples[first-1].Errors) == 0 {
			zero = first - 1
		} else if d.i0 <= first && first <= d.i1 {
			note("first seen at %v, right after a scrape that missed targets: its growth before then is not counted", d.samples[first].At)
		}
	}
	get := func(k int) ([]float64, bool) {
		if k == zero {
			v, _ := vec(&d.samples[first], p, name, hist)
			return make([]float64, len(v)), true
		}
		return vec(&d.samples[k], p, name, hist)
	}
	held := func(k int) bool { _, ok := get(k); return ok }
	ia, ib := d.nearest(d.start, held), d.nearest(d.end, held)
	if ia < 0 || ia >= ib {
		return nil, false
	}
	if ia != d.i0 {
		note("missing from the scrape at %v: used the one at %v", d.samples[d.i0].At, d.samples[ia].At)
	}
	if ib != d.i1 {
		note("missing from the scrape at %v: used the one at %v", d.samples[d.i1].At, d.samples[ib].At)
	}
	prev, _ := get(ia)
	kPrev := ia
	delta = make([]float64, len(prev))
	whole := hist || wholeCounts[name]
	for k := ia + 1; k <= ib; k++ {
		cur, held := get(k)
		if !held {
			continue
		}
		if len(cur) != len(prev) {
			return nil, false
		}
		reset := false
		for i := range cur {
			// The last value of a histogram is its sum, which rounding may
			// shrink; only counts tell a reset.
			if cur[i] < prev[i] && !(hist && i == len(cur)-1) {
				reset = true
				break
			}
		}
		if reset {
			// A restart starts from zero: what it shows next is at most what
			// the series gains in about one scrape. A drop to more than that
			// is a series that shrank with no restart (a proxy or exporter
			// scaling it): no delta of it can be trusted in this window.
			if at, bound, ok := d.restartBound(hist, kPrev, k, get); !ok {
				d.bad = true
				note("went down between %v and %v to %g, more than a restart could have counted since (%g a scrape): the series shrank with no restart, so this window has no data for it",
					d.samples[kPrev].At, d.samples[k].At, at, bound)
				return nil, false
			}
			note("went down between %v and %v (engine restart?): delta taken from zero for that series", d.samples[kPrev].At, d.samples[k].At)
		}
		for i := range cur {
			step := cur[i] - prev[i]
			if reset {
				step = cur[i]
			}
			if whole && !(hist && i == len(cur)-1) && !isWhole(step) {
				d.bad = true
				note("moved by %g between %v and %v, a fraction of a count: counts are whole, so this window has no data for it", step, d.samples[kPrev].At, d.samples[k].At)
				return nil, false
			}
			delta[i] += step
		}
		prev, kPrev = cur, k
	}
	return delta, true
}

// wholeCounts are the counters that count requests, which only move by
// whole numbers (histogram counts always do).
var wholeCounts = map[string]bool{
	RequestsOK: true, RequestsAborted: true, RequestsFailed: true,
	HTTP2xx: true, HTTP4xx: true, HTTP5xx: true, Preemptions: true,
}

// isWhole reports whether x is a whole number, to rounding.
func isWhole(x float64) bool {
	return math.Abs(x-math.Round(x)) <= 1e-6*math.Max(1, math.Abs(x))
}

// restartBound tells a restart from a series that shrank, for a drop of one
// part's series between samples a and b: after a restart the series holds
// only what it counted since, at most about one scrape's growth (taken as
// twice the larger growth of the scrape before a and the one after b). at
// is the count after the drop (a counter's value, a histogram's count). ok
// is true for a restart, and when no growth either side is known.
func (d *deltas) restartBound(hist bool, a, b int, get func(int) ([]float64, bool)) (at, bound float64, ok bool) {
	held := func(k int) bool { _, ok := get(k); return ok }
	count := func(v []float64) float64 {
		if hist {
			return v[len(v)-2]
		}
		return v[0]
	}
	cur, _ := get(b)
	at = count(cur)
	if at == 0 {
		return at, 0, true
	}
	known := false
	growth := func(i, j int) {
		if i < 0 || j >= len(d.samples) || !held(i) || !held(j) {
			return
		}
		vi, _ := get(i)
		vj, _ := get(j)
		if len(vi) != len(vj) || count(vj) < count(vi) {
			return
		}
		known = true
		bound = math.Max(bound, 2*(count(vj)-count(vi)))
	}
	before := -1
	for k := a - 1; k >= 0; k-- {
		if held(k) {
			before = k
			break
		}
	}
	after := -1
	for k := b + 1; k < len(d.samples); k++ {
		if held(k) {
			after = k
			break
		}
	}
	if before >= 0 {
		growth(before, a)
	}
	if after >= 0 {
		growth(b, after)
	}
	return at, bound, !known || at <= bound
}

// counter sums the parts' deltas of one counter.
func (d *deltas) counter(name string) (float64, bool) {
	_, inA := d.samples[d.i0].Counter[name]
	_, inB := d.samples[d.i1].Counter[name]
	total, found := 0.0, false
	d.bad = false
	for _, p := range d.parts(name, false) {
		if v, ok := d.partDelta(p, name, false); ok {
			total += v[0]
			found = true
		}
	}
	if d.bad {
		return 0, false
	}
	return total, found || (inA && inB)
}

// hist sums the parts' deltas of one histogram, on the buckets of the
// samples; it is left out when the buckets changed within the window.
func (d *deltas) hist(name string) (stats.Histogram, bool) {
	var upper []float64
	for k := d.i0; k <= d.i1; k++ {
		h, ok := d.samples[k].Hist[name]
		if !ok {
			continue
		}
		if upper == nil {
			upper = h.Upper
		} else if !h.SameBounds(stats.Histogram{Upper: upper}) {
			note := fmt.Sprintf("changed buckets between %v and %v: left out of this window", d.samples[d.i0].At, d.samples[d.i1].At)
			d.notes[note] = append(d.notes[note], name)
			return stats.Histogram{}, false
		}
	}
	var sum []float64
	d.bad = false
	for _, p := range d.parts(name, true) {
		v, ok := d.partDelta(p, name, true)
		if d.bad {
			return stats.Histogram{}, false
		}
		if !ok || len(v) != len(upper)+2 {
			continue
		}
		if sum == nil {
			sum = make([]float64, len(v))
		}
		for i := range v {
			sum[i] += v[i]
		}
	}
	if sum == nil {
		return stats.Histogram{}, false
	}
	n := len(upper)
	return stats.Histogram{Upper: slices.Clone(upper), Cumulative: sum[:n:n], Count: sum[n], Sum: sum[n+1]}, true
}
