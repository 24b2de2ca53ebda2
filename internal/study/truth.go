package study

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/rig"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// Level is the truth at one session count: the histograms of every judged
// window of many independent runs' steps at that count (each run with its
// own workload and sweep seed, none of the study's) pooled into one, and
// the P90s read from that pool. No estimator under study defines it: it is what
// each run's P90 tends to as the traffic a run draws is averaged out.
type Level struct {
	Sessions int `json:"sessions"`
	Runs     int `json:"runs"`
	Windows  int `json:"windows"`
	// TTFTP90 is the pooled P90 time to first token, in seconds.
	TTFTP90 float64 `json:"ttft_p90_s"`
	// InteractivityP90 is 1 / the pooled P90 time per output token: the
	// speed 90% of streams beat, tokens/s per user.
	InteractivityP90 float64 `json:"interactivity_p90_tps"`
	// ErrorRate is every error over every planned turn of the runs' steps.
	ErrorRate float64 `json:"error_rate"`
	// Fine says the level is on the fine grid near the crossing, not one
	// the study's runs stepped at.
	Fine bool `json:"fine,omitempty"`
	// Cold says no truth run climbed the ladder to this level (a step below
	// it missed in each), so its runs started cold at it.
	Cold bool `json:"cold,omitempty"`
}

// Within says whether the truth holds the bar on every part.
func (l Level) Within(bar verdict.Bar) bool {
	return l.TTFTP90 <= bar.TTFTP90 && l.InteractivityP90 >= bar.InteractivityP90 && l.ErrorRate < bar.ErrorRate
}

// margin is the worst part's room left before the bar, as a share of that
// bar: positive within the bar, negative beyond it.
func (l Level) margin(bar verdict.Bar) float64 {
	m := (bar.TTFTP90 - l.TTFTP90) / bar.TTFTP90
	m = math.Min(m, (l.InteractivityP90-bar.InteractivityP90)/bar.InteractivityP90)
	if bar.ErrorRate > 0 {
		m = math.Min(m, (bar.ErrorRate-l.ErrorRate)/bar.ErrorRate)
	}
	return m
}

// Truth is the pooled truth at a choice of session counts.
type Truth struct {
	Levels []Level `json:"levels"`
	// Capacity is where the pooled truth crosses the bar: interpolated
	// between the last level within it and the first level beyond it on
	// the worst part's relative margin. +Inf when every level held (JSON:
	// null), 0 when none did.
	Capacity float64 `json:"capacity"`
	// Bracket is that last level within and first level beyond (0: none).
	Bracket [2]int `json:"bracket"`
}

// At returns the truth at n sessions.
func (t Truth) At(n int) (Level, bool) {
	for _, l := range t.Levels {
		if l.Sessions == n {
			return l, true
		}
	}
	return Level{}, false
}

// crossing finds the capacity the levels' truth gives (see Truth.Capacity).
func (t *Truth) crossing(bar verdict.Bar) {
	slices.SortFunc(t.Levels, func(a, b Level) int { return a.Sessions - b.Sessions })
	t.Capacity, t.Bracket = math.Inf(1), [2]int{}
	var last *Level
	for i := range t.Levels {
		l := &t.Levels[i]
		if l.Within(bar) {
			last = l
			continue
		}
		t.Bracket[1] = l.Sessions
		if last == nil {
			t.Capacity = 0
			return
		}
		t.Bracket[0] = last.Sessions
		mp, mf := math.Max(0, last.margin(bar)), math.Min(0, l.margin(bar))
		frac := 0.5
		if mp-mf > 0 {
			frac = mp / (mp - mf)
		}
		t.Capacity = float64(last.Sessions) + frac*float64(l.Sessions-last.Sessions)
		return
	}
	if last != nil {
		t.Bracket[0] = last.Sessions
	}
}

// truthSeed is the seed of the j-th single-level run at n sessions: apart
// from the study's runs (1000 + i) and from every other level's.
func truthSeed(n, j int) uint64 { return 1_000_000 + uint64(n)*1000 + uint64(j) }

// levelRun is what one single-level run adds to its level's pool.
type levelRun struct {
	ttft, tpot      []stats.Histogram
	itl             []weighted // per-window decode seconds per token, when no TPOT histogram
	errors, planned float64
	windows         int
}

type weighted struct{ v, w float64 }

// measureLevels runs runs truth runs at each of levels (all at once, on
// workers) and pools each level's windows. A truth run climbs the recipe's
// ladder to the level, as the study's runs reach it (see levelConfig); a
// level no climb reached (a step below it missed in every run) is measured
// by runs that start cold at it instead.
func measureLevels(ctx context.Context, base config.Run, levels []int, runs, workers int, run RunFunc) ([]Level, error) {
	got := make([]levelRun, len(levels)*runs)
	var mu sync.Mutex
	pass := func(cold bool, todo []int) error {
		return rig.Parallel(ctx, len(todo)*runs, workers, func(ctx context.Context, k int) error {
			i, j := todo[k/runs], k%runs
			n := levels[i]
			r, err := truthRun(ctx, base, n, truthSeed(n, j), cold, run)
			if err != nil {
				return fmt.Errorf("truth at %d sessions, seed %d: %w", n, truthSeed(n, j), err)
			}
			mu.Lock()
			got[i*runs+j] = r
			mu.Unlock()
			return nil
		})
	}
	all := make([]int, len(levels))
	for i := range all {
		all[i] = i
	}
	if err := pass(false, all); err != nil {
		return nil, err
	}
	var unreached []int
	for i := range levels {
		if !slices.ContainsFunc(got[i*runs:(i+1)*runs], func(r levelRun) bool { return r.windows > 0 }) {
			unreached = append(unreached, i)
		}
	}
	if err := pass(true, unreached); err != nil {
		return nil, err
	}
	out := make([]Level, len(levels))
	for i, n := range levels {
		var all levelRun
		reached := 0
		for _, r := range got[i*runs : (i+1)*runs] {
			if r.windows > 0 {
				reached++
			}
			all.ttft = append(all.ttft, r.ttft...)
			all.tpot = append(all.tpot, r.tpot...)
			all.itl = append(all.itl, r.itl...)
			all.errors += r.errors
			all.planned += r.planned
			all.windows += r.windows
		}
		l := Level{Sessions: n, Runs: reached, Cold: slices.Contains(unreached, i), Windows: all.windows, TTFTP90: math.NaN(), InteractivityP90: math.NaN(), ErrorRate: math.NaN()}
		if h, err := stats.Pool(all.ttft); err == nil {
			if v, _, _, ok := h.Quantile(0.9); ok {
				l.TTFTP90 = v
			}
		} else {
			return nil, fmt.Errorf("truth at %d sessions: %w", n, err)
		}
		if len(all.tpot) > 0 {
			h, err := stats.Pool(all.tpot)
			if err != nil {
				return nil, fmt.Errorf("truth at %d sessions: %w", n, err)
			}
			if v, _, _, ok := h.Quantile(0.9); ok {
				l.InteractivityP90 = 1 / v
			}
		} else if v, ok := weightedP90(all.itl); ok {
			l.InteractivityP90 = 1 / v
		}
		if all.planned > 0 {
			l.ErrorRate = all.errors / all.planned
		}
		out[i] = l
	}
	return out, nil
}

// truthRun runs base up to n sessions (see levelConfig; cold: n alone)
// and reads the windows of its step at n back from its run directory,
// which it then removes. A climb that stopped below n gives no windows.
func truthRun(ctx context.Context, base config.Run, n int, seed uint64, cold bool, run RunFunc) (levelRun, error) {
	cfg := levelConfig(base, n, seed, cold)
	// A cold start primes every lane at once: it gets twice the warm-up,
	// and any run twice again while that is too short.
	grow := 1.0
	if cold {
		grow = 2
	}
	var sum report.Summary
	var err error
	for range 3 {
		c := cfg
		c.Sweep.WarmupS = cfg.Sweep.WarmupS * grow
		if c.Workload.PrimeTimeoutS == cfg.Sweep.WarmupS {
			c.Workload.PrimeTimeoutS = c.Sweep.WarmupS
		}
		if sum, err = run(ctx, c); !errors.Is(err, sweep.ErrWarmupTooShort) {
			break
		}
		grow *= 2
	}
	if err != nil {
		return levelRun{}, err
	}
	if sum.RunDir == "" {
		return levelRun{}, fmt.Errorf("the run wrote no run directory")
	}
	defer os.RemoveAll(sum.RunDir)
	d, err := report.OpenDir(sum.RunDir)
	if err != nil {
		return levelRun{}, err
	}
	saved, err := rig.ReadRun(d)
	if err != nil {
		return levelRun{}, err
	}
	width := rig.SweepPlan(saved.Config).Window
	var r levelRun
	for _, st := range saved.Steps {
		if st.Sessions != n {
			continue
		}
		from := time.Duration(st.MeasureStart * float64(time.Second))
		to := time.Duration(st.End * float64(time.Second))
		ws := signal.Windows(saved.Samples, from, to, width)
		r.windows += len(ws)
		for _, w := range ws {
			if h, ok := w.Hist[signal.TTFT]; ok && !h.Empty() {
				r.ttft = append(r.ttft, h)
			}
			if h, ok := w.Hist[signal.TPOT]; ok && !h.Empty() {
				r.tpot = append(r.tpot, h)
			} else if h, ok := w.Hist[signal.ITL]; ok && h.Count > 0 && h.Sum > 0 && !math.IsInf(h.Sum, 0) {
				r.itl = append(r.itl, weighted{v: h.Sum / h.Count, w: h.Count})
			}
		}
		if p, ok := st.Judged.Part(verdict.PartErrors); ok && !math.IsNaN(p.Value.Center) && st.Load.Planned > 0 {
			r.errors += p.Value.Center * float64(st.Load.Planned)
			r.planned += float64(st.Load.Planned)
		}
	}
	if r.windows == 0 && cold {
		return r, fmt.Errorf("no judged step of %d sessions in %s", n, sum.RunDir)
	}
	return r, nil
}

// levelConfig is base climbing its own ladder's steps below n and then n,
// as the study's runs reach n, with its own seed and no repeat, no kill
// switch (a step beyond the bar is measured whole, not cut short) and no
// other mixes; cold, it is the one step of n.
func levelConfig(base config.Run, n int, seed uint64, cold bool) config.Run {
	cfg := base
	cfg.Sweep.Ladder = nil
	for _, m := range base.Sweep.Ladder {
		if m < n && !cold {
			cfg.Sweep.Ladder = append(cfg.Sweep.Ladder, m)
		}
	}
	cfg.Sweep.Ladder = append(cfg.Sweep.Ladder, n)
	cfg.Sweep.Target, cfg.Sweep.Stress = n, 0
	cfg.Sweep.Mode = "ladder"
	f := false
	cfg.Sweep.Repeat = &f
	cfg.Sweep.Kill = config.Kill{}
	if len(cfg.Sweep.Mixes) > 1 {
		cfg.Sweep.Mixes = cfg.Sweep.Mixes[:1]
	}
	cfg.Workload.Seed, cfg.Sweep.Seed = seed, seed
	return cfg
}

// weightedP90 is the 0.9 quantile of the values, each counted w times: the
// P90 of per-request time per output token when a window's requests are
// all taken at that window's mean (as the verdict derives it).
func weightedP90(xs []weighted) (float64, bool) {
	xs = slices.Clone(xs)
	slices.SortFunc(xs, func(a, b weighted) int { return cmp.Compare(a.v, b.v) })
	obs, ws := make([]stats.Obs, len(xs)), make([]float64, len(xs))
	for i, x := range xs {
		obs[i], ws[i] = stats.Obs{Value: x.v}, x.w
	}
	return stats.WeightedQuantile(0.9)(obs, ws)
}
