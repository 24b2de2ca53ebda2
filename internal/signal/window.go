package signal

import (
	"fmt"
	"math"
	"slices"
	"sort"
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
// shorter than width/2 is merged into the one before it) and takes deltas
// between the samples closest to each edge. Samples must be sorted by At.
//
// A family present in one edge sample and absent in the other is absent in
// that window. A counter or histogram that went down between the edges was
// reset (an engine restart): the later value is taken as the delta from zero,
// with a warning.
//
// Limitation: samples hold sums across targets, so a reset is only seen when
// the sum goes down; a restart of one engine copy hidden by another copy's
// growth gives too small a delta. Per-series reset detection needs per-target
// samples.
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
	for _, e := range []struct {
		edge time.Duration
		s    Sample
	}{{start, a}, {end, b}} {
		if d := e.s.At - e.edge; d > tolerance || -d > tolerance {
			warn("no scrape near the edge at %v: used the one at %v", e.edge, e.s.At)
		}
		if len(e.s.Errors) > 0 {
			warn("scrape at %v missed targets (%v): deltas in this window may be wrong", e.s.At, e.s.Errors)
		}
	}
	if i0 == i1 {
		warn("window [%v, %v) has the same scrape at both edges: no deltas (scrape more often than the window width)", start, end)
	} else {
		for name, hb := range b.Hist {
			ha, ok := a.Hist[name]
			if !ok {
				continue
			}
			if !hb.SameBounds(ha) {
				warn("histogram %s changed buckets between %v and %v: left out of this window", name, a.At, b.At)
				continue
			}
			if hb.Decreased(ha) {
				warn("histogram %s went down between %v and %v (engine restart?): delta taken from zero", name, a.At, b.At)
				w.Hist[name] = hb.Clone()
				continue
			}
			d, err := hb.Sub(ha)
			if err != nil {
				warn("histogram %s: %v", name, err)
				continue
			}
			w.Hist[name] = d
		}
		for name, vb := range b.Counter {
			va, ok := a.Counter[name]
			if !ok {
				continue
			}
			if vb < va {
				warn("counter %s went down between %v and %v (engine restart?): delta taken from zero", name, a.At, b.At)
				w.Counter[name] = vb
				continue
			}
			w.Counter[name] = vb - va
		}
	}
	for _, s := range samples {
		if s.At < start || s.At > end || (s.At == end && !last) {
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
