package calibrate

import (
	"container/heap"
	"sort"
)

// occupancy is how many requests ran in the engine over time, rebuilt from
// the spans: the engine runs at most max_num_seqs of the requests in flight
// and queues the rest first come first served, so running is min(M, in
// flight). It answers the load factor's mean over a stretch, from the
// integral of the running requests beyond the first.
type occupancy struct {
	m     int
	t     []float64 // the times the in-flight count changes, sorted
	n     []int     // requests in flight from t[i] to t[i+1]
	cum   []float64 // the integral of excess up to t[i]
	admit []float64 // per span (in the spans' order): when it took a slot
}

// excess is the load factor's variable part for n requests running:
// (min(n, M) - 1) / (M - 1), 0 for one or none.
func (o *occupancy) excess(n int) float64 {
	if o.m <= 1 || n <= 1 {
		return 0
	}
	return float64(min(n, o.m)-1) / float64(o.m-1)
}

func newOccupancy(spans []span, m int) *occupancy {
	o := &occupancy{m: max(1, m)}
	type ev struct {
		t float64
		d int
	}
	evs := make([]ev, 0, 2*len(spans))
	for _, s := range spans {
		evs = append(evs, ev{s.arrive, 1}, ev{max(s.last, s.arrive), -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].t != evs[j].t {
			return evs[i].t < evs[j].t
		}
		return evs[i].d < evs[j].d // leave before arriving at one instant
	})
	n, acc := 0, 0.0
	for i, e := range evs {
		if i > 0 {
			acc += o.excess(n) * (e.t - evs[i-1].t)
		}
		n += e.d
		if k := len(o.t); k > 0 && o.t[k-1] == e.t {
			o.n[k-1], o.cum[k-1] = n, acc
			continue
		}
		o.t, o.n, o.cum = append(o.t, e.t), append(o.n, n), append(o.cum, acc)
	}
	// FCFS slots: a request takes a slot when it arrives or when the
	// earliest of the M requests ahead of it ends, whichever is later.
	o.admit = make([]float64, len(spans))
	var ends endHeap
	for i, s := range spans {
		at := s.arrive
		for len(ends) > 0 && ends[0] <= at {
			heap.Pop(&ends)
		}
		if len(ends) >= o.m {
			at = max(at, heap.Pop(&ends).(float64))
		}
		o.admit[i] = min(at, s.first)
		heap.Push(&ends, s.last)
	}
	return o
}

// integral is the excess integrated up to t.
func (o *occupancy) integral(t float64) float64 {
	i := sort.SearchFloat64s(o.t, t)
	if i < len(o.t) && o.t[i] == t {
		return o.cum[i]
	}
	if i == 0 {
		return 0
	}
	return o.cum[i-1] + o.excess(o.n[i-1])*(t-o.t[i-1])
}

// at is the excess just after t.
func (o *occupancy) at(t float64) float64 {
	i := sort.Search(len(o.t), func(i int) bool { return o.t[i] > t })
	if i == 0 {
		return 0
	}
	return o.excess(o.n[i-1])
}

// mean is the excess's mean over [t0, t1], or its value at t0 for an
// empty stretch.
func (o *occupancy) mean(t0, t1 float64) float64 {
	if o == nil {
		return 0
	}
	if t1-t0 <= 1e-9 {
		return o.at(t0)
	}
	return (o.integral(t1) - o.integral(t0)) / (t1 - t0)
}

type endHeap []float64

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(float64)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
