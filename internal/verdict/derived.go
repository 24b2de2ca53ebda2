package verdict

import (
	"fmt"
	"math"
	"slices"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
)

// windowTPOT is one window's per-request time per output token derived from
// per-token latency (see signal.DerivedTPOT): decode seconds over output
// tokens, weighted by those tokens.
type windowTPOT struct{ perToken, tokens float64 }

// derivedTPOTs reads each window's itl_seconds as decode seconds per output
// token. absent counts windows without the histogram or without its sum;
// windows whose histogram has no observations give nothing and are not
// absent (no token was generated there).
func (j judge) derivedTPOTs() (ws []windowTPOT, absent int) {
	for _, w := range j.windows {
		h, ok := w.Hist[signal.ITL]
		switch {
		case !ok:
			absent++
		case h.Count <= 0:
		case !(h.Sum > 0) || math.IsInf(h.Sum, 0):
			absent++ // observations without a usable sum cannot be averaged
		default:
			ws = append(ws, windowTPOT{perToken: h.Sum / h.Count, tokens: h.Count})
		}
	}
	return ws, absent
}

// weightedP90 is the 0.9 quantile of the windows' values, each weighted by
// its tokens: the P90 of the per-request figure when every request of a
// window is taken at that window's mean.
func weightedP90(ws []windowTPOT, idx []int) (float64, bool) {
	pick := make([]windowTPOT, 0, len(idx))
	total := 0.0
	for _, i := range idx {
		pick = append(pick, ws[i])
		total += ws[i].tokens
	}
	if total <= 0 {
		return 0, false
	}
	slices.SortFunc(pick, func(a, b windowTPOT) int {
		switch {
		case a.perToken < b.perToken:
			return -1
		case a.perToken > b.perToken:
			return 1
		}
		return 0
	})
	run := 0.0
	for _, w := range pick {
		run += w.tokens
		if run >= 0.9*total*(1-1e-12) {
			return w.perToken, true
		}
	}
	return pick[len(pick)-1].perToken, true
}

// derivedP90 measures the per-request time per output token derived from
// per-token latency over the step, for a server that reports no per-request
// figure. A mean has no bucket: the interval is the bootstrap's over
// windows, widened to hold the center.
func (j judge) derivedP90() (r quantileResult, ok bool, why string) {
	ws, absent := j.derivedTPOTs()
	r.absent, r.n = absent, len(j.windows)
	if len(ws) == 0 {
		if absent == len(j.windows) {
			return r, false, fmt.Sprintf("%s (with its sum) is missing from every window", signal.ITL)
		}
		return r, false, fmt.Sprintf("%s has no observations in the step", signal.ITL)
	}
	all := make([]int, len(ws))
	for i := range all {
		all[i] = i
	}
	v, _ := weightedP90(ws, all)
	r.v, r.bucket = v, [2]float64{v, v}
	r.observations = 0
	for _, w := range ws {
		r.observations += w.tokens
	}
	scores := make([]float64, len(ws))
	for i, w := range ws {
		in := 0.0
		if w.perToken <= v {
			in = 1
		}
		scores[i] = w.tokens * (in - 0.9)
	}
	block := j.blockFor(scores)
	lo, hi, ok := stats.Bootstrap(len(ws), func(idx []int) (float64, bool) { return weightedP90(ws, idx) }, j.boot(block))
	if ok && len(ws) >= 2 {
		var sp Spread
		lo, hi, sp, ok = j.spread(v, lo, hi, len(ws), block, j.widening(clientTPOT, stats.WeightedQuantile(0.9), block), true)
		r.spread = &sp
	}
	if !ok || len(ws) < 2 {
		lo, hi = v, v
		r.spread = nil
		r.warnings = append(r.warnings, fmt.Sprintf("%s: too few windows with tokens to bootstrap; the interval is the value alone", signal.ITL))
	}
	r.lo, r.hi = math.Min(lo, v), math.Max(hi, v)
	if absent > 0 {
		r.warnings = append(r.warnings, fmt.Sprintf("%s is missing from %d of %d windows: judged on the rest, and it cannot pass", signal.ITL, absent, r.n))
	}
	return r, true, ""
}
