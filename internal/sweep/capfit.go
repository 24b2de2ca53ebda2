package sweep

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/headroom-bench/headroom/internal/verdict"
)

// Capacity from every judged step at once. For each bar part with a value
// (TTFT, interactivity, errors), the part's distance from the bar is fitted
// against sessions by weighted isotonic regression (pool adjacent
// violators: more sessions never make a part better), each step weighted by
// the inverse square of its interval's width, and the crossing is where the
// fitted curve, linear between the steps, meets the bar. Latency is fitted
// in the log of its value (TTFT grows about exponentially into saturation),
// errors as the rate itself.
//
// The crossing's 95% interval comes from resampling: each step's value is
// drawn from its own estimate and interval (a split normal in the fit's
// scale whose 2.5% and 97.5% points are the interval's bounds), the curve is
// refitted and crossed again, and the 2.5th and 97.5th percentiles of the
// crossings are the bounds. A part at the engine's limit (verdict.Part's
// AtLimit: the engine preempted or filled its KV cache) or too close with its interval inside the
// bar (a run the kill switch cut short) is placed on the bar, with a spread
// that reaches its measured value. A step whose part read fail stays off the bar in
// every draw (the verdict may rest on more than the interval: an open bucket
// edge). A draw that misses at the first step is "below the first step" and
// one that holds at the last is "not reached": nothing is extrapolated
// beyond the steps that ran, so a bound that falls there reads 0 or the last
// step, open.

// capacityResamples is the number of resampled ladders; the seed is fixed so
// that `judge` on a run directory reproduces what the run said.
const (
	capacityResamples = 2000
	capacitySeed      = 0x6865616472
)

// fitLevel is one ladder level of one part: its distance from the bar in
// the fit's scale, oriented so that > 0 is off the bar, with the standard
// deviations below and above it that its interval implies.
type fitLevel struct {
	x        float64
	d        float64
	down, up float64
	w        float64
	failed   bool // the part read fail here
	idx      int  // the index in pts of the step at this level
}

// scaleOf maps a part's value into the fit's scale, oriented so that larger
// is worse; bar is mapped the same way.
func scaleOf(rule partRule) func(v, bar float64) float64 {
	if rule.name == verdict.PartErrors {
		return func(v, bar float64) float64 { return v - bar }
	}
	sign := 1.0
	if !rule.higherIsWorse {
		sign = -1
	}
	return func(v, bar float64) float64 {
		b := math.Abs(bar)
		if b == 0 {
			b = 1
		}
		// no extrapolation past 1000x either way: an open bucket edge (0 or
		// +Inf) is far off, not infinitely so
		v = math.Min(math.Max(v, b*1e-3), b*1e3)
		return sign * (math.Log(v) - math.Log(b))
	}
}

// zOf is the standard normal quantile of a two-sided interval's confidence.
func zOf(conf float64) float64 {
	if conf <= 0 || conf >= 1 {
		conf = 0.95
	}
	return math.Sqrt2 * math.Erfinv(conf)
}

// fitLevels reads one part from the sorted steps: one level per distinct
// sessions count with a value, repeats pooled by inverse variance, up to
// the first level where the part has no value. end is the index in pts of
// that level's step (-1 when every level had a value).
func fitLevels(pts []Point, rule partRule) (levels []fitLevel, end int) {
	scale := scaleOf(rule)
	end = -1
	for i := 0; i < len(pts); {
		j := i
		for j < len(pts) && pts[j].Sessions == pts[i].Sessions {
			j++
		}
		lv := fitLevel{x: float64(pts[i].Sessions), idx: j - 1}
		var sw, swd, sdown, sup float64
		fails, measured := 0, 0
		for k := i; k < j; k++ {
			part, ok := pts[k].Judged.Part(rule.name)
			v := part.Value
			if !ok || part.Verdict == verdict.NoData || math.IsNaN(v.Center) || math.IsNaN(v.Lo) || math.IsNaN(v.Hi) {
				continue
			}
			z := zOf(v.Confidence)
			c := scale(v.Center, part.Bar)
			a, b := scale(v.Lo, part.Bar), scale(v.Hi, part.Bar)
			best, worst := math.Min(a, b), math.Max(a, b)
			floor := 1e-6
			down := math.Max((c-best)/z, floor)
			up := math.Max((worst-c)/z, floor)
			if demoted(part, worst) && c < 0 {
				// the engine preempted, or the kill switch cut the run short:
				// the level is at its limit, so the fit places it on the
				// bar, as likely beyond as within, with a spread that
				// reaches the measured value at its best
				down = math.Max(down, -best/z)
				up = math.Max(up, down)
				c = 0
			}
			se := (down + up) / 2
			w := 1 / (se * se)
			measured++
			if part.Verdict == verdict.Fail {
				fails++
			}
			sw += w
			swd += w * c
			sdown += 1 / (down * down)
			sup += 1 / (up * up)
		}
		if sw == 0 {
			return levels, j - 1
		}
		lv.d, lv.w = swd/sw, sw
		lv.down, lv.up = 1/math.Sqrt(sdown), 1/math.Sqrt(sup)
		lv.failed = fails == measured // every run at this level failed
		if lv.failed && (lv.d < 0 || lv.d == 0 && rule.name != verdict.PartErrors) {
			// failed with its value inside the bar: the verdict rests on
			// something the value does not show (a kill switch), so the
			// value is no use to the fit; the fail bounds it from above
			return levels, j - 1
		}
		levels = append(levels, lv)
		i = j
	}
	return levels, end
}

// demoted reports whether a part reads too close for a reason its value
// does not show: the engine was at its limit (AtLimit), or its interval (worst, its
// worse bound in the fit's scale) lies within the bar and yet it is too
// close, as judgeKilled leaves a part whose run the kill switch cut short.
// Taken at its value, such a level would hold the bar in the fit.
func demoted(part verdict.Part, worst float64) bool {
	return part.AtLimit || part.Verdict == verdict.TooClose && worst < 0
}

// isotonic fits a non-decreasing sequence to d with weights w by pooling
// adjacent violators, into out.
func isotonic(d, w, out []float64) {
	type block struct {
		sum, w float64
		n      int
	}
	blocks := make([]block, 0, len(d))
	for i := range d {
		blocks = append(blocks, block{d[i] * w[i], w[i], 1})
		for len(blocks) > 1 {
			a, b := blocks[len(blocks)-2], blocks[len(blocks)-1]
			if a.sum/a.w <= b.sum/b.w {
				break
			}
			blocks = append(blocks[:len(blocks)-2], block{a.sum + b.sum, a.w + b.w, a.n + b.n})
		}
	}
	k := 0
	for _, b := range blocks {
		for range b.n {
			out[k] = b.sum / b.w
			k++
		}
	}
}

// crossing kinds
const (
	crossed = iota
	crossBelow
	crossNotReached
)

// crossFit is where a fitted, non-decreasing curve first leaves the bar,
// linear between levels; kind says whether it did, or missed at the first
// level, or held at the last. j is the level where it left.
func crossFit(xs, f []float64, strict bool) (at float64, kind, j int) {
	off := func(d float64) bool { return d > 0 || strict && d >= 0 }
	for j := range f {
		if !off(f[j]) {
			continue
		}
		if j == 0 {
			return 0, crossBelow, 0
		}
		x0, x1, f0, f1 := xs[j-1], xs[j], f[j-1], f[j]
		at = x0
		if f1 != f0 {
			at = x0 + (0-f0)/(f1-f0)*(x1-x0)
		}
		return math.Max(x0, math.Min(x1, at)), crossed, j
	}
	return xs[len(xs)-1], crossNotReached, len(xs) - 1
}

// fitCrossings is the centre, lower (pessimistic) and upper (optimistic)
// crossings of one part from every step at once.
func fitCrossings(pts []Point, rule partRule) (center, pess, opt crossing) {
	levels, end := fitLevels(pts, rule)
	if len(levels) == 0 {
		c := crossing{at: 0, reached: true, below: true, noData: true}
		if end >= 0 {
			c.step = end
		}
		return c, c, c
	}
	strict := rule.name == verdict.PartErrors
	n := len(levels)
	xs, d, w, f := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i, lv := range levels {
		xs[i], d[i], w[i] = lv.x, lv.d, lv.w
		if lv.failed {
			d[i] = math.Max(d[i], 1e-9)
		}
	}
	// a curve that holds to the last level with a value, when a level
	// above it had none, ends there for lack of data: a missing measurement
	// never passes, and it bounds nothing from above
	ended := func() crossing {
		last := levels[n-1]
		return crossing{at: last.x, reached: true, noData: true, step: end}
	}
	// ...unless the part failed there without a value (a step the kill
	// switch ended on too few windows): then it bounds the crossing from
	// above, closed at that step, though nothing says where below it
	failedAt := end >= 0 && failedWithoutValue(pts, end, rule.name)
	isotonic(d, w, f)
	at, kind, j := crossFit(xs, f, strict)
	switch {
	case kind == crossNotReached && end >= 0:
		center = ended()
	case kind == crossNotReached:
		center = crossing{at: at}
	default:
		center = crossing{at: at, reached: true, below: kind == crossBelow, step: levels[j].idx}
	}

	rng := rand.New(rand.NewPCG(capacitySeed, uint64(len(rule.name))))
	draws := make([]float64, capacityResamples)
	dd := make([]float64, n)
	for r := range draws {
		for i, lv := range levels {
			z := rng.NormFloat64()
			s := lv.up
			if z < 0 {
				s = lv.down
			}
			dd[i] = lv.d + z*s
			if lv.failed {
				dd[i] = math.Max(dd[i], 1e-9)
			}
		}
		isotonic(dd, w, f)
		a, k, _ := crossFit(xs, f, strict)
		switch k {
		case crossBelow:
			draws[r] = 0
		case crossNotReached:
			draws[r] = math.Inf(1)
		default:
			draws[r] = a
		}
	}
	slices.Sort(draws)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(draws)))) - 1
		return draws[max(0, min(len(draws)-1, i))]
	}
	bound := func(v float64, upper bool) crossing {
		switch {
		case math.IsInf(v, 1) && upper && failedAt:
			return crossing{at: float64(pts[end].Sessions), reached: true, step: end}
		case math.IsInf(v, 1) && end >= 0:
			return ended()
		case math.IsInf(v, 1):
			return crossing{at: xs[n-1]}
		case v == 0 && upper:
			// somewhere below the first step: its sessions bound it
			return crossing{at: xs[0], reached: true, step: levels[0].idx}
		case v == 0:
			return crossing{at: 0, reached: true, below: true, step: levels[0].idx}
		}
		k := levelAt(xs, v)
		return crossing{at: v, reached: true, step: levels[k].idx}
	}
	return center, bound(rank(0.025), false), bound(rank(0.975), true)
}

// levelAt is the index of the first level at or above x.
func levelAt(xs []float64, x float64) int {
	i, _ := slices.BinarySearch(xs, x)
	return min(i, len(xs)-1)
}

// failedWithoutValue reports whether the part read fail at the level of
// pts[end], which gave the fit no value (none, or one inside the bar).
func failedWithoutValue(pts []Point, end int, name string) bool {
	for _, p := range pts {
		if p.Sessions != pts[end].Sessions {
			continue
		}
		if part, ok := p.Judged.Part(name); ok && part.Verdict == verdict.Fail {
			return true
		}
	}
	return false
}
