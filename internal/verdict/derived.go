package verdict

import (
	"cmp"
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
// window is taken at that window's mean. A step has 10-25 windows, so it is
// the Harrell-Davis estimate (stats.HarrellDavis): the plain quantile of 10
// values is the 9th, which reads the population's 0.82 quantile on average
// and so reads fast.
func weightedP90(ws []windowTPOT, idx []int) (float64, bool) {
	pick := make([]windowTPOT, 0, len(idx))
	for _, i := range idx {
		pick = append(pick, ws[i])
	}
	slices.SortFunc(pick, func(a, b windowTPOT) int { return cmp.Compare(a.perToken, b.perToken) })
	vs, w := make([]float64, len(pick)), make([]float64, len(pick))
	for i, p := range pick {
		vs[i], w[i] = p.perToken, p.tokens
	}
	return stats.HarrellDavis(0.9, vs, w)
}

// slowSide mirrors a bootstrap interval's reach on the slow side: the
// longer of its two reaches from v, on the log scale. A P90 of few windows
// sits near the slowest of them, and no resample reaches past the slowest
// window the run saw, so the bootstrap's slow side is short by construction
// (TestDerivedIntervalCoversFewWindows: 10 windows from a known
// distribution, 71% covered with the plain P90 and the slow side as drawn,
// 95% with the Harrell-Davis P90 and the slow side mirrored).
func slowSide(v, lo, hi float64) (float64, float64) {
	if !(v > 0 && lo > 0 && hi >= v) {
		return lo, hi
	}
	r := math.Max(math.Log(v)-math.Log(lo), math.Log(hi)-math.Log(v))
	return lo, math.Max(hi, v*math.Exp(r))
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
	if ok {
		lo, hi = slowSide(v, lo, hi)
	}
	if ok && len(ws) >= 2 {
		var sp Spread
		lo, hi, sp, ok = j.spread(v, lo, hi, len(ws), block, j.widening(clientTPOT, stats.WeightedQuantile(0.9), block), j.pressure(clientTPOT), true)
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
