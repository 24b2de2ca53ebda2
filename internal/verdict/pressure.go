package verdict

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// pressure is the reach, on the log scale, that a latency's interval needs
// for how much prefill the step's sessions happened to send. A long
// uncached prompt (a session resuming cold, its whole history prefilled
// again) slows every stream beside it on an engine that prefills inside its
// decode iterations, so a step's latency depends on how many such prompts
// its sessions drew. When most windows hold one, resampling windows barely
// varies their number, and resampling sessions moves the cold session's
// own records, not the slowdown it caused in the others': between runs the
// number varies far more than either sees (docs/statistics.md, "Cold
// resumes").
//
// It is measured on the client's records in two parts:
//
//   - the slope b of a turn's log latency on the prefill the other turns of
//     its window and the one before sent (uncached prompt tokens, as a share
//     of two windows' mean: a long prefill slows the turns that were already
//     decoding when it came as well as those sent beside it), by least
//     squares, less z times its standard error: only the slowdown the
//     records show with confidence counts, and one at or below zero adds
//     nothing;
//   - how far the step's total uncached tokens U would vary between runs.
//     Whether a turn comes long is a draw turn by turn, so U varies as a
//     compound Poisson sum, with variance sum(u^2) over the turns: that of
//     a Poisson count of k = U^2 / sum(u^2) equal prefills, dominated by the
//     long ones. Resampling sessions cannot show it: with one long prompt in
//     each of most sessions it varies their count as K (1 - K/C), not K.
//
// A step that drew a share d more prefill reads about b d slower on the
// log scale. Below and above are b times the relative reach of the 95%
// Poisson interval of k (Garwood's, from the chi-square) down and up; it
// reaches further up than down, since a run that drew few long prefills
// reads fast and its slow side must reach the runs that drew more. Both are
// 0 without records, without uncached tokens, without a slowdown, or when
// k is under minPrefills. The pair is below, above, as spread takes it.
func (j judge) pressure(q clientQuantity) [2]float64 {
	var none [2]float64
	if len(j.reqs) == 0 || len(j.windows) < 2 {
		return none
	}
	sent := make([]float64, len(j.windows))
	total, sumSq := 0.0, 0.0
	for _, r := range j.reqs {
		if r.Window < 0 || r.Window >= len(j.windows) {
			continue
		}
		u := float64(max(r.Uncached, 0))
		sent[r.Window] += u
		total += u
		sumSq += u * u
	}
	mean := total / float64(len(j.windows))
	if !(mean > 0) {
		return none
	}
	// the slope of log latency on the others' prefill in the turn's window
	// and the one before
	var n, sx, sy, sxx, sxy, syy float64
	for _, r := range j.reqs {
		if r.Window < 0 || r.Window >= len(j.windows) || r.Failed {
			continue
		}
		v := r.TTFT
		if q == clientTPOT {
			v = r.TPOT
		}
		if !(v > 0) {
			continue
		}
		x := (around(sent, r.Window) - float64(max(r.Uncached, 0))) / (2 * mean)
		y := math.Log(v)
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
		syy += y * y
	}
	if n < 3 {
		return none
	}
	vx := sxx - sx*sx/n
	if !(vx > 0) {
		return none
	}
	// only the slowdown the records show with confidence: the slope less
	// its standard error times z, so that a step with few long prefills,
	// whose slope is a guess, is not widened by the guess
	b := (sxy - sx*sy/n) / vx
	rss := math.Max(0, (syy-sy*sy/n)-b*(sxy-sx*sy/n))
	z := distuv.UnitNormal.Quantile(1 - (1-j.o.Confidence)/2)
	b -= z * math.Sqrt(rss/(n-2)/vx)
	if !(b > 0) {
		return none
	}
	// the total as a Poisson count of k equal prefills (total > 0 here,
	// so sumSq is too); under minPrefills a slope from one or two long
	// prefills would be stretched over the several a Poisson count of
	// them allows
	k := total * total / sumSq
	if k < minPrefills {
		return none
	}
	a := 1 - j.o.Confidence
	lo := distuv.ChiSquared{K: 2 * k}.Quantile(a/2) / 2
	hi := distuv.ChiSquared{K: 2*k + 2}.Quantile(1-a/2) / 2
	return [2]float64{b * (1 - lo/k), b * (hi/k - 1)}
}

// around is the prefill sent in window w and the one before it.
func around(sent []float64, w int) float64 {
	if w > 0 {
		return sent[w] + sent[w-1]
	}
	return 2 * sent[w]
}

// minPrefills is the fewest equal prefills (k) the step's uncached tokens
// must add up to for pressure to widen: a Poisson count's usual floor for
// its normal form.
const minPrefills = 5
