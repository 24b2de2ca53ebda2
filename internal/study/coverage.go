package study

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// Options size a coverage study.
type Options struct {
	// Runs is how many ordinary runs are measured, each with its own seed.
	Runs int
	// TruthRuns is how many single-level runs are pooled into the truth at
	// each level.
	TruthRuns int
	// Fine is the most levels of the fine grid between the last level whose
	// truth held and the first that did not (default 6).
	Fine    int
	Workers int
	// FirstSeed is the first run's seed (the i-th run's is FirstSeed+i);
	// 0 is 1000. Another first seed measures a rule on runs it was not
	// chosen from.
	FirstSeed uint64
}

// Rate is k of n with its 95% Wilson score interval.
type Rate struct {
	K  int     `json:"k"`
	N  int     `json:"n"`
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

func rate(k, n int) Rate {
	lo, hi := stats.Wilson(k, n, 0.95)
	return Rate{K: k, N: n, Lo: lo, Hi: hi}
}

// Share is k/n; NaN when n is 0.
func (r Rate) Share() float64 {
	if r.N == 0 {
		return math.NaN()
	}
	return float64(r.K) / float64(r.N)
}

func (r Rate) String() string {
	if r.N == 0 {
		return "n/a (0 of 0)"
	}
	return fmt.Sprintf("%.0f%% (%d/%d; %.0f-%.0f%%)", 100*r.Share(), r.K, r.N, 100*r.Lo, 100*r.Hi)
}

// Width is an interval's mean half-width against the spread of its
// estimate between runs: calibrated is 1.96 standard deviations of the
// estimate, and CalibratedHi the same with the standard deviation's own
// upper 95% bound (chi-square), so that a few runs' noise is not read as a
// too-wide interval.
type Width struct {
	// N is how many runs had an estimate; Finite how many of their
	// intervals had both ends finite (the mean is over those).
	N             int     `json:"n"`
	Finite        int     `json:"finite"`
	MeanHalfWidth float64 `json:"mean_half_width"`
	SD            float64 `json:"sd"`
	Calibrated    float64 `json:"calibrated"`
	CalibratedHi  float64 `json:"calibrated_hi"`
}

// Ratio is the mean half-width over the calibrated one.
func (w Width) Ratio() float64 { return w.MeanHalfWidth / w.Calibrated }

func widthOf(centers, lo, hi []float64) Width {
	w := Width{N: len(centers), MeanHalfWidth: math.NaN(), SD: math.NaN(), Calibrated: math.NaN(), CalibratedHi: math.NaN()}
	sum := 0.0
	for i := range lo {
		if math.IsInf(lo[i], 0) || math.IsInf(hi[i], 0) || math.IsNaN(lo[i]) || math.IsNaN(hi[i]) {
			continue
		}
		w.Finite++
		sum += (hi[i] - lo[i]) / 2
	}
	if w.Finite > 0 {
		w.MeanHalfWidth = sum / float64(w.Finite)
	}
	if n := len(centers); n >= 2 {
		mean := 0.0
		for _, c := range centers {
			mean += c
		}
		mean /= float64(n)
		ss := 0.0
		for _, c := range centers {
			ss += (c - mean) * (c - mean)
		}
		w.SD = math.Sqrt(ss / float64(n-1))
		w.Calibrated = 1.96 * w.SD
		w.CalibratedHi = w.Calibrated * math.Sqrt(float64(n-1)/chi2Lower(float64(n-1)))
	}
	return w
}

// chi2Lower is the 2.5% quantile of the chi-square distribution with k
// degrees of freedom (Wilson-Hilferty: within 1% from k = 10; below it
// the approximation is low, which makes the bound it gives wider).
func chi2Lower(k float64) float64 {
	a := 2 / (9 * k)
	return math.Max(1e-9, k*math.Pow(1-a-1.959964*math.Sqrt(a), 3))
}

// PartLevel is how one part's step intervals at one session count did
// against the truth there.
type PartLevel struct {
	Part     string  `json:"part"`
	Sessions int     `json:"sessions"`
	Truth    float64 `json:"truth"`
	Covered  Rate    `json:"covered"`
	// Above and Below count intervals lying wholly above or below the truth.
	Above int   `json:"above"`
	Below int   `json:"below"`
	Width Width `json:"width"`
}

// Coverage is what a coverage study measured on one recipe.
type Coverage struct {
	Recipe string   `json:"recipe"`
	Runs   int      `json:"runs"`
	Seeds  []uint64 `json:"seeds"`
	Truth  Truth    `json:"truth"`
	// Capacity is how often the runs' capacity intervals hold the truth's
	// capacity; Above and Below count intervals wholly above or below it.
	Capacity      Rate  `json:"capacity"`
	CapacityAbove int   `json:"capacity_above"`
	CapacityBelow int   `json:"capacity_below"`
	CapacityWidth Width `json:"capacity_width"`
	// Capacities are the runs' capacities, in seed order.
	Capacities []string `json:"capacities"`
	// Steps are the step intervals by part and level; TTFT and
	// Interactivity pool every level.
	Steps         []PartLevel `json:"steps"`
	TTFT          Rate        `json:"ttft"`
	Interactivity Rate        `json:"interactivity"`
	// FalsePass is the share of steps whose truth is beyond the bar that
	// read pass; FalseFail of steps whose truth is within that read fail.
	// A step reads the worst of its ttft, interactivity and errors parts.
	FalsePass Rate `json:"false_pass"`
	FalseFail Rate `json:"false_fail"`
	// GPUMinutes is what a sweep spent, first step's start to last step's
	// end, warm-ups and drains included, times the recipe's GPUs.
	GPUMinutes struct {
		Mean float64 `json:"mean"`
		Min  float64 `json:"min"`
		Max  float64 `json:"max"`
	} `json:"gpu_minutes_per_sweep"`
	WallS float64 `json:"wall_s"`
}

// MeasureCoverage runs base o.Runs times (seed o.FirstSeed+i, 1000+i by
// default, for workload and bootstrap both), measures the pooled truth at every session count the
// runs stepped at and on a fine grid near where it crosses the bar, and
// scores every step interval, verdict and capacity interval against it.
func MeasureCoverage(ctx context.Context, base config.Run, o Options, run RunFunc, progress io.Writer) (Coverage, error) {
	start := time.Now()
	if o.Fine <= 0 {
		o.Fine = 6
	}
	if o.FirstSeed == 0 {
		o.FirstSeed = 1000
	}
	if o.FirstSeed+uint64(o.Runs) > 1_000_000 {
		return Coverage{}, fmt.Errorf("seeds %d to %d reach the truth runs' seeds (1000000 and up): give a first seed below %d", o.FirstSeed, o.FirstSeed+uint64(o.Runs)-1, 1_000_000-o.Runs)
	}
	cov := Coverage{Recipe: base.Recipe.Name, Runs: o.Runs, Seeds: make([]uint64, o.Runs), Capacities: make([]string, o.Runs)}
	sums := make([]report.Summary, o.Runs)
	var mu sync.Mutex
	err := rig.Parallel(ctx, o.Runs, o.Workers, func(ctx context.Context, i int) error {
		cfg := base
		seed := o.FirstSeed + uint64(i)
		cfg.Workload.Seed, cfg.Sweep.Seed = seed, seed
		sum, err := run(ctx, cfg)
		if err != nil {
			return fmt.Errorf("seed %d: %w", seed, err)
		}
		mu.Lock()
		sums[i], cov.Seeds[i], cov.Capacities[i] = sum, seed, sum.Capacity.String()
		mu.Unlock()
		fmt.Fprintf(progress, "coverage %s: seed %d: capacity %s\n", base.Recipe.Name, seed, sum.Capacity.String())
		return nil
	})
	if err != nil {
		return cov, err
	}
	var stepped []int
	for _, s := range sums {
		for _, st := range s.Steps {
			if !slices.Contains(stepped, st.Sessions) {
				stepped = append(stepped, st.Sessions)
			}
		}
	}
	slices.Sort(stepped)
	bar := verdict.Bar{TTFTP90: base.Bar.TTFTP90S, InteractivityP90: base.Bar.InteractivityP90TPS, ErrorRate: base.Bar.ErrorRate}
	levels, err := measureLevels(ctx, base, stepped, o.TruthRuns, o.Workers, run)
	if err != nil {
		return cov, err
	}
	cov.Truth.Levels = levels
	cov.Truth.crossing(bar)
	if fine := fineGrid(cov.Truth, o.Fine); len(fine) > 0 {
		more, err := measureLevels(ctx, base, fine, o.TruthRuns, o.Workers, run)
		if err != nil {
			return cov, err
		}
		for i := range more {
			more[i].Fine = true
		}
		cov.Truth.Levels = append(cov.Truth.Levels, more...)
		cov.Truth.crossing(bar)
	}
	for _, l := range cov.Truth.Levels {
		fmt.Fprintf(progress, "coverage %s: truth at %d sessions (%d runs, %d windows): TTFT P90 %.3f s, interactivity P90 %.2f tok/s, errors %.2f%%\n",
			base.Recipe.Name, l.Sessions, l.Runs, l.Windows, l.TTFTP90, l.InteractivityP90, 100*l.ErrorRate)
	}
	cov.score(sums, bar, base.Recipe.Nodes*base.Recipe.GPUsPerNode)
	cov.WallS = time.Since(start).Seconds()
	return cov, nil
}

// fineGrid is the levels strictly between the truth's bracket (from one
// session up when nothing held), at most n of them, evenly spread, that
// are not measured yet.
func fineGrid(t Truth, n int) []int {
	lo, hi := t.Bracket[0], t.Bracket[1]
	if hi == 0 {
		return nil // nothing failed: no crossing to look for
	}
	if lo == 0 {
		lo = max(0, hi-n-1)
	}
	var out []int
	gap := hi - lo - 1
	step := max(1, int(math.Ceil(float64(gap)/float64(n))))
	for x := lo + step; x < hi; x += step {
		if _, ok := t.At(x); !ok && x >= 1 {
			out = append(out, x)
		}
	}
	return out
}

// score counts, over every run, what its steps and capacity say against
// the truth.
func (c *Coverage) score(sums []report.Summary, bar verdict.Bar, gpus int) {
	type acc struct {
		centers, lo, hi    []float64
		covered, n, ab, be int
	}
	parts := map[string]map[int]*acc{verdict.PartTTFT: {}, verdict.PartInteractivity: {}}
	var fp, beyond, ff, within int
	var capC, capLo, capHi []float64
	capCovered := 0
	c.GPUMinutes.Min = math.Inf(1)
	for _, s := range sums {
		m := cost(s, gpus).GPUMinutes
		c.GPUMinutes.Mean += m / float64(len(sums))
		c.GPUMinutes.Min, c.GPUMinutes.Max = math.Min(c.GPUMinutes.Min, m), math.Max(c.GPUMinutes.Max, m)
		for _, st := range s.Steps {
			truth, ok := c.Truth.At(st.Sessions)
			if !ok {
				continue
			}
			read := verdict.Pass
			for _, p := range st.Parts {
				switch p.Name {
				case verdict.PartTTFT, verdict.PartInteractivity, verdict.PartErrors:
					read = verdict.Worse(read, p.Verdict)
				}
				t := truth.TTFTP90
				if p.Name == verdict.PartInteractivity {
					t = truth.InteractivityP90
				} else if p.Name != verdict.PartTTFT {
					continue
				}
				if math.IsNaN(p.Value.Center) || math.IsNaN(t) {
					continue
				}
				a := parts[p.Name][st.Sessions]
				if a == nil {
					a = &acc{}
					parts[p.Name][st.Sessions] = a
				}
				a.n++
				lo, hi := p.Bounds() // a run cut short or at the engine's limit claims its bad side open
				if p.Open() != "" && p.Name == verdict.PartInteractivity {
					// open down to 0 tokens/s: an open end, which the
					// width leaves out as it does TTFT's +Inf
					lo = math.Inf(-1)
				}
				a.centers, a.lo, a.hi = append(a.centers, p.Value.Center), append(a.lo, lo), append(a.hi, hi)
				switch {
				case lo > t:
					a.ab++
				case hi < t:
					a.be++
				default:
					a.covered++
				}
			}
			if truth.Within(bar) {
				within++
				if read == verdict.Fail {
					ff++
				}
			} else {
				beyond++
				if read == verdict.Pass {
					fp++
				}
			}
		}
		k := s.Capacity
		hi := k.Hi
		if k.HiOpen || k.AtLeast {
			hi = math.Inf(1)
		}
		switch {
		case k.Lo > c.Truth.Capacity:
			c.CapacityAbove++
		case hi < c.Truth.Capacity:
			c.CapacityBelow++
		default:
			capCovered++
		}
		if !k.NotEstablished && !k.AtLeast && !k.BelowFirst {
			capC, capLo, capHi = append(capC, k.Sessions), append(capLo, k.Lo), append(capHi, hi)
		}
	}
	c.Capacity = rate(capCovered, len(sums))
	c.CapacityWidth = widthOf(capC, capLo, capHi)
	c.FalsePass, c.FalseFail = rate(fp, beyond), rate(ff, within)
	var tk, tn, ik, in int
	for _, name := range []string{verdict.PartTTFT, verdict.PartInteractivity} {
		for _, l := range c.Truth.Levels {
			a := parts[name][l.Sessions]
			if a == nil {
				continue
			}
			t := l.TTFTP90
			if name == verdict.PartInteractivity {
				t = l.InteractivityP90
				ik, in = ik+a.covered, in+a.n
			} else {
				tk, tn = tk+a.covered, tn+a.n
			}
			c.Steps = append(c.Steps, PartLevel{Part: name, Sessions: l.Sessions, Truth: t, Covered: rate(a.covered, a.n), Above: a.ab, Below: a.be, Width: widthOf(a.centers, a.lo, a.hi)})
		}
	}
	c.TTFT, c.Interactivity = rate(tk, tn), rate(ik, in)
}
