package stats

import (
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// BlockLength is the moving-block length the bootstrap uses for n
// neighbouring, dependent units (windows) when it is not given one: n^(1/3)
// rounded, the order that balances a block bootstrap's bias against its
// variance (Hall, Horowitz and Jing 1995), and at least 2 once n >= 8, so
// neighbouring windows travel together once there are at least 4 blocks to
// draw; 1 below 8 units, where blocks would leave too few to resample.
func BlockLength(n int) int {
	if n < 8 {
		return 1
	}
	return max(2, int(math.Round(math.Cbrt(float64(n)))))
}

// Expansion is the factor by which a percentile bootstrap interval's reach
// from its center is widened to keep its coverage with few independent
// units: sqrt(n/(n-1)) t(n-1)/z at the interval's confidence, the expanded
// percentile interval (Hesterberg 2015, "What teachers should know about
// the bootstrap"). A resample of few units sees too little of their spread
// (by (n-1)/n) and a spread estimated from few units is itself uncertain (t,
// not z). n need not be whole (n windows in blocks of b are n/b units);
// below 2 units nothing is known and the factor is +Inf.
func Expansion(n, confidence float64) float64 {
	if !(confidence > 0 && confidence < 1) {
		confidence = 0.95
	}
	if !(n >= 2) {
		return math.Inf(1)
	}
	p := 1 - (1-confidence)/2
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}.Quantile(p)
	return math.Sqrt(n/(n-1)) * t / distuv.UnitNormal.Quantile(p)
}

// Obs is one observation of a design with two crossed factors: it lies in
// one window (the unit the server's histograms are kept in) and in one
// cluster (the session whose play it belongs to). Windows and clusters are
// numbered from 0.
type Obs struct {
	Window, Cluster int
	// Stratum is the cluster's stratum: clusters are resampled within their
	// stratum, keeping as many of each as the run had (a mix's tiers, whose
	// lane counts the run fixes). Every observation of one cluster has the
	// same stratum; the zero value puts every cluster in one.
	Stratum int
	Value   float64
}

// Weighted is a statistic of observations each counted weight times; it
// returns ok=false when it cannot be measured (no weight on any value).
type Weighted func(obs []Obs, weight []float64) (float64, bool)

// WeightedMean is the mean of the values, each counted its weight times.
func WeightedMean(obs []Obs, weight []float64) (float64, bool) {
	s, w := 0.0, 0.0
	for i, o := range obs {
		s += weight[i] * o.Value
		w += weight[i]
	}
	if w <= 0 {
		return 0, false
	}
	return s / w, true
}

// WeightedQuantile returns the q-quantile of the values, each counted its
// weight times (the smallest value whose weight at or below it reaches q of
// the total). obs must be sorted by value.
func WeightedQuantile(q float64) Weighted {
	return func(obs []Obs, weight []float64) (float64, bool) {
		total := 0.0
		for _, w := range weight {
			total += w
		}
		if total <= 0 {
			return 0, false
		}
		run, last := 0.0, math.NaN()
		for i, o := range obs {
			if weight[i] <= 0 {
				continue
			}
			run += weight[i]
			last = o.Value
			if run >= q*total*(1-1e-12) {
				return o.Value, true
			}
		}
		return last, true
	}
}

// Widening is what resampling clusters as well as windows adds to an
// interval, measured on observations that carry both (the client's records).
// Block is the percentile interval of a statistic under the moving-block
// bootstrap of windows alone, as the server's histograms are resampled;
// Lo and Hi reach from the center as far as the variance of windows and
// clusters together: on each side, the block reach squared plus what
// resampling clusters adds beyond resampling single observations
// (cluster reach squared less plain reach squared, when positive).
type Widening struct {
	Center            float64 // the statistic on every observation once
	BlockLo, BlockHi  float64 // windows resampled in moving blocks
	Lo, Hi            float64 // windows and clusters
	Windows, Clusters int
	OK                bool // false when there was too little to resample
}

// ClusterWidening measures what a crossed design of windows and clusters
// (sessions span many windows, every window holds many sessions) adds to the
// moving-block bootstrap of windows. Each resample draws windows in moving
// blocks (Block as in Bootstrap; 0 takes BlockLength), clusters with
// replacement, and single observations with replacement, each independently,
// and evaluates stat weighted by each draw. For a mean of crossed effects,
// Var = s_w^2/W + s_c^2/C + s_e^2/N: the block bootstrap sees the first and
// last terms (every window holds every cluster, so a cluster effect is
// invisible to it), the cluster bootstrap the last two, the plain one about
// the last; block + cluster - plain estimates the whole without counting the
// noise twice, as the product-weight (pigeonhole) bootstrap does (Owen 2007,
// "The pigeonhole bootstrap"). The combination is done on each side's reach
// from the center; the cluster and plain reaches are taken as the longer of
// their two sides, since a run that drew no session from a tail cannot
// resample one (with few sessions the percentile interval of a skewed
// statistic falls short on the side the run did not draw). Fewer than 2 windows or 2 clusters give OK=false. obs
// must be sorted by value when stat is a WeightedQuantile.
func ClusterWidening(obs []Obs, windows, clusters int, stat Weighted, o BootstrapOptions) Widening {
	r := Widening{Windows: windows, Clusters: clusters}
	if windows < 2 || clusters < 2 || len(obs) == 0 {
		return r
	}
	o = o.withDefaults()
	ones := make([]float64, len(obs))
	for i := range ones {
		ones[i] = 1
	}
	c, ok := stat(obs, ones)
	if !ok {
		return r
	}
	r.Center = c
	block := o.Block
	if block == 0 {
		block = BlockLength(windows)
	}
	block = min(block, windows)
	rng := rand.New(rand.NewPCG(o.Seed^0x5bd1e995, o.Seed^0x2545f4914f6cdd1d))
	cw := make([]float64, windows)
	cc := make([]float64, clusters)
	// strata lists each stratum's clusters; a stratum of one cluster
	// resamples to itself (nothing to learn within it).
	byStratum := map[int][]int{}
	seen := make([]bool, clusters)
	for _, ob := range obs {
		if ob.Cluster >= 0 && ob.Cluster < clusters && !seen[ob.Cluster] {
			seen[ob.Cluster] = true
			byStratum[ob.Stratum] = append(byStratum[ob.Stratum], ob.Cluster)
		}
	}
	keys := make([]int, 0, len(byStratum))
	for k := range byStratum {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	strata := make([][]int, 0, len(keys))
	for _, k := range keys {
		strata = append(strata, byStratum[k])
	}
	weight := make([]float64, len(obs))
	var vb, vc, vp []float64
	measure := func(into *[]float64) {
		if v, ok := stat(obs, weight); ok && !math.IsNaN(v) {
			*into = append(*into, v)
		}
	}
	starts := windows - block + 1
	for range o.Resamples {
		clear(cw)
		for i := 0; i < windows; {
			s := rng.IntN(starts)
			for j := 0; j < block && i < windows; j++ {
				cw[s+j]++
				i++
			}
		}
		for i, ob := range obs {
			weight[i] = cw[ob.Window]
		}
		measure(&vb)
		clear(cc)
		for _, st := range strata {
			for range st {
				cc[st[rng.IntN(len(st))]]++
			}
		}
		for i, ob := range obs {
			weight[i] = cc[ob.Cluster]
		}
		measure(&vc)
		clear(weight)
		for range obs {
			weight[rng.IntN(len(obs))]++
		}
		measure(&vp)
	}
	if 2*len(vb) < o.Resamples || 2*len(vc) < o.Resamples || 2*len(vp) < o.Resamples {
		return r
	}
	a := (1 - o.Confidence) / 2
	bounds := func(v []float64) (float64, float64) {
		slices.Sort(v)
		return percentile(v, a), percentile(v, 1-a)
	}
	bLo, bHi := bounds(vb)
	cLo, cHi := bounds(vc)
	pLo, pHi := bounds(vp)
	reach := func(b, cl, p float64) float64 {
		b, cl, p = math.Max(0, b), math.Max(0, cl), math.Max(0, p)
		return math.Sqrt(b*b + math.Max(0, cl*cl-p*p))
	}
	eb := Expansion(float64(windows)/float64(block), o.Confidence)
	// the clusters' degrees of freedom: one is spent on each stratum's mean
	ec := Expansion(float64(max(2, clusters-len(strata)+1)), o.Confidence)
	r.BlockLo, r.BlockHi = c-eb*math.Max(0, c-bLo), c+eb*math.Max(0, bHi-c)
	cl, pl := math.Max(c-cLo, cHi-c), math.Max(c-pLo, pHi-c)
	r.Lo = c - reach(eb*(c-bLo), ec*cl, pl)
	r.Hi = c + reach(eb*(bHi-c), ec*cl, pl)
	r.OK = true
	return r
}

// Widen stretches an interval [lo, hi] around its center v by what the
// clusters add. On each side, the variance resampling clusters adds on top
// of window blocks (both^2 - block^2, measured on the same observations) is
// added to the side's own reach in quadrature: reach' = sqrt(reach^2 +
// both^2 - block^2). So the stretch is bounded by the clusters' own reach;
// a ratio both/block, applied to a reach measured elsewhere (the server's
// windows), blew up where the client's block-only reach was small (a 4-session
// step read TTFT [0.145, 22.9] s around 1.52 s). An infinite side stays
// infinite.
func (w Widening) Widen(v, lo, hi float64) (float64, float64) {
	if !w.OK {
		return lo, hi
	}
	add := func(reach, block, both float64) float64 {
		block, both = math.Max(0, block), math.Max(0, both)
		extra := math.Max(0, both*both-block*block)
		return math.Sqrt(reach*reach + extra)
	}
	if !math.IsInf(lo, 0) {
		lo = v - add(math.Max(0, v-lo), w.Center-w.BlockLo, w.Center-w.Lo)
	}
	if !math.IsInf(hi, 0) {
		hi = v + add(math.Max(0, hi-v), w.BlockHi-w.Center, w.Hi-w.Center)
	}
	return lo, hi
}
