package calibrate

import (
	"math"
	"sort"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/signal"
)

// span is one finished request as the engine is taken to have seen it:
// arrival, the stretch in which its uncached prompt was computed, and its
// decode, in modelled seconds since the run started.
type span struct {
	arrive, prefillStart, first, last float64
	prompt, cached, output            int
	lane, play                        int
}

func (s span) uncached() int { return max(0, s.prompt-s.cached) }

// decodeTokens is how many tokens the request sampled after its first.
func (s span) decodeTokens() int { return max(0, s.output-1) }

// spansOf turns the successful records into spans, sorted by arrival.
//
// A request reaches the engine some time after the client sent it (its body
// is written, read and parsed first): gap says how long for a prompt of a
// given size. That matters only when the engine had nothing else to do in
// between; while other requests are in flight the engine's iterations go on
// regardless, and the stretch from send to first token holds exactly the
// work the engine did. So arrivals move by gap only for requests sent while
// no other request was in flight.
//
// Prefill starts are placed first-come-first-served: a request's prompt is
// computed after every earlier arrival produced its first token, as both
// engines schedule chunked prefill.
func spansOf(recs []load.Record, gap func(prompt int) float64) (out []span, skipped int) {
	for _, r := range recs {
		if r.Failed() || r.FirstToken <= 0 || r.LastToken < r.FirstToken || r.ServedPromptTokens <= 0 || r.OutputTokens < 1 {
			if r.ReachedServer() {
				skipped++
			}
			continue
		}
		out = append(out, span{
			arrive: r.Send, first: r.FirstToken, last: r.LastToken,
			prompt: r.ServedPromptTokens, cached: min(r.CachedTokens, r.ServedPromptTokens), output: r.OutputTokens,
			lane: r.Lane, play: r.Play,
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].arrive < out[j].arrive })
	busyUntil := math.Inf(-1) // the latest last token of the requests sent so far
	for i := range out {
		s := &out[i]
		if s.arrive >= busyUntil {
			s.arrive = min(s.first, s.arrive+gap(s.prompt))
		}
		busyUntil = max(busyUntil, s.last)
	}
	// Requests sent together (the lanes a step adds prime at once) reach
	// the engine in an order no stamp shows; the order of their first
	// tokens is the order they were served in.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].arrive != out[j].arrive {
			return out[i].arrive < out[j].arrive
		}
		return out[i].first < out[j].first
	})
	latest := math.Inf(-1)
	for i := range out {
		s := &out[i]
		s.prefillStart = max(s.arrive, min(latest, s.first))
		latest = max(latest, s.first)
	}
	return out, skipped
}

// frac is how far t is through [a, b], clamped to [0, 1]; an empty stretch
// is a step at b.
func frac(t, a, b float64) float64 {
	if b-a <= 1e-9 {
		if t >= b {
			return 1
		}
		return 0
	}
	return min(1, max(0, (t-a)/(b-a)))
}

// work is what the engine did over a stretch of time, summed over the
// requests in it: the regressors of the iteration cost model.
type work struct {
	maxDecode     float64 // the most tokens any one request decoded (a lower bound on iterations)
	decodeTokens  float64
	decodeContext float64 // context tokens read by those decodes
	prefill       float64 // prompt tokens computed
	pairs         float64 // prefill attention (token, earlier token) pairs
	prefillIters  float64 // prefill chunks, at budget tokens each
}

// workIn sums the work of spans over (t0, t1]. Each request's prefill is
// spread evenly over its prefill stretch and its decode over its decode,
// evenly in the iterations clk counts (in seconds when clk is nil).
func workIn(spans []span, t0, t1 float64, budget int, clk *iterClock) work {
	var w work
	for _, s := range spans {
		if s.arrive > t1 {
			break // sorted by arrival
		}
		if s.last <= t0 {
			continue
		}
		if u := float64(s.uncached()); u > 0 {
			y0, y1 := clk.fracIn(t0, s.prefillStart, s.first), clk.fracIn(t1, s.prefillStart, s.first)
			if dy := y1 - y0; dy > 0 {
				w.prefill += u * dy
				w.pairs += u * (float64(s.cached)*dy + u*(y1*y1-y0*y0)/2)
				w.prefillIters += math.Ceil(u/float64(budget)) * dy
			}
		}
		if k := float64(s.decodeTokens()); k > 0 {
			x0, x1 := clk.fracIn(t0, s.first, s.last), clk.fracIn(t1, s.first, s.last)
			if dx := x1 - x0; dx > 0 {
				n := k * dx
				w.decodeTokens += n
				w.maxDecode = max(w.maxDecode, n)
				w.decodeContext += k*float64(s.prompt)*dx + k*k*(x1*x1-x0*x0)/2
			}
		}
	}
	return w
}

// resident is the KV the requests hold at t, in tokens rounded up to
// blocks: a request holds its cached prefix and what it has computed from
// the start of its prefill to its last token. Requests of one lane in
// flight together (a parent and its subagents) are taken to share the
// shortest cached prefix among them, held once.
func resident(spans []span, t float64, block int) float64 {
	type key struct{ lane, play int }
	type lane struct {
		n         int
		minCached int
	}
	lanes := map[key]*lane{}
	total := 0.0
	blocks := func(tok float64) float64 { return math.Ceil(tok/float64(block)) * float64(block) }
	for _, s := range spans {
		if s.arrive > t {
			break
		}
		if t < s.prefillStart || t >= s.last || (t >= s.first && s.decodeTokens() == 0) {
			continue
		}
		var held float64
		if t < s.first {
			held = float64(s.cached) + float64(s.uncached())*frac(t, s.prefillStart, s.first)
		} else {
			held = float64(s.prompt) + float64(s.decodeTokens())*frac(t, s.first, s.last) + 1
		}
		total += blocks(held)
		k := key{s.lane, s.play}
		l := lanes[k]
		if l == nil {
			l = &lane{minCached: s.cached}
			lanes[k] = l
		}
		l.n++
		l.minCached = min(l.minCached, s.cached)
	}
	for _, l := range lanes {
		if l.n > 1 {
			total -= float64(l.n-1) * math.Floor(float64(l.minCached)/float64(block)) * float64(block)
		}
	}
	return total
}

// stretches are spans of time, sorted.
type stretches [][2]float64

// kvFull is the KV-usage gauge reading above which the engine is taken to
// be short of KV.
const kvFull = 0.9

// troubledOf is where the engine preempted requests or ran short of KV,
// scrape to scrape: the preemptions counter moved (a restart sets it back)
// or the KV-usage gauge read kvFull or more at either end. A preempted
// request computes its prompt again, work no record shows; a request
// waiting for KV blocks has its prompt computed at a time no record shows,
// and while blocks are short the engine evicts and recomputes. The fit
// leaves out every window that touches one of these.
func troubledOf(samples []signal.Sample) stretches {
	var out stretches
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		pa, okA := a.Counter[signal.Preemptions]
		pb, okB := b.Counter[signal.Preemptions]
		if (okA && okB && pb != pa) || a.Gauge[signal.KVCacheUsage] >= kvFull || b.Gauge[signal.KVCacheUsage] >= kvFull {
			out = append(out, [2]float64{a.At.Seconds(), b.At.Seconds()})
		}
	}
	return out
}

// touches reports whether (t0, t1] meets any of the stretches.
func (s stretches) touches(t0, t1 float64) bool {
	i := sort.Search(len(s), func(i int) bool { return s[i][1] > t0 })
	return i < len(s) && s[i][0] < t1
}

// histDelta is a histogram's count and sum between two samples, false when
// either lacks it or it went backwards (a restart).
func histDelta(a, b signal.Sample, name string) (count, sum float64, ok bool) {
	ha, okA := a.Hist[name]
	hb, okB := b.Hist[name]
	if !okA || !okB {
		return 0, 0, false
	}
	count, sum = hb.Count-ha.Count, hb.Sum-ha.Sum
	return count, sum, count >= 0 && sum >= 0
}
