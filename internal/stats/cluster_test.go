package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBlockLength(t *testing.T) {
	cases := []struct{ n, want int }{
		{0, 1}, {1, 1}, {7, 1}, // too few windows to move in blocks
		{8, 2}, {20, 3}, // at least 2 once n >= 8; 20^(1/3) = 2.7
		{30, 3}, {60, 4}, {125, 5}, // n^(1/3) rounded
	}
	for _, c := range cases {
		if got := BlockLength(c.n); got != c.want {
			t.Errorf("BlockLength(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// crossedDraw is one run of a crossed design: clusters sessions, each with a
// random effect of sd tau that lasts the whole run, every one of them sending
// perCell observations in each of windows windows, each the session's effect
// plus noise of sd 1. The true mean over runs is 0.
func crossedDraw(rng *rand.Rand, windows, clusters, perCell int, tau float64) []Obs {
	var out []Obs
	for c := range clusters {
		u := tau * rng.NormFloat64()
		for w := range windows {
			for range perCell {
				out = append(out, Obs{Window: w, Cluster: c, Value: u + rng.NormFloat64()})
			}
		}
	}
	return out
}

// TestClusterWideningCoversWhatTheRunDrew: when every window holds every
// session and the sessions differ (a between-session effect that lasts the
// run), resampling windows alone cannot see which sessions the run drew and
// its interval (expanded for its few blocks) misses the truth about half the
// time; the interval of windows and sessions holds it about 95% of the time.
// Without a session effect both cover and the widening is small. Measured
// (200 trials, 20 windows, 12 sessions): tau 0.5: 0.495 and 0.945, x3.98;
// tau 0: 0.950 and 0.965, x1.13.
func TestClusterWideningCoversWhatTheRunDrew(t *testing.T) {
	const trials, windows, clusters, perCell = 200, 20, 12, 3
	cases := []struct {
		name                       string
		tau                        float64
		blockMin, blockMax, twoWay float64 // coverage bounds
		meanFactorAtMost           float64
	}{
		{"sessions differ (tau 0.5)", 0.5, 0, 0.65, 0.9, math.Inf(1)},
		{"sessions alike (tau 0)", 0, 0.9, 1, 0.9, 1.3},
	}
	for _, c := range cases {
		rng := rand.New(rand.NewPCG(11, uint64(100*c.tau)))
		block, twoWay, factors := 0, 0, 0.0
		for trial := range trials {
			obs := crossedDraw(rng, windows, clusters, perCell, c.tau)
			w := ClusterWidening(obs, windows, clusters, WeightedMean, BootstrapOptions{Resamples: 400, Seed: uint64(trial)})
			if !w.OK {
				t.Fatalf("%s: no widening measured", c.name)
			}
			if w.BlockLo <= 0 && 0 <= w.BlockHi {
				block++
			}
			if w.Lo <= 0 && 0 <= w.Hi {
				twoWay++
			}
			// widening the block interval by the factors gives the combined one
			lo, hi := w.Widen(w.Center, w.BlockLo, w.BlockHi)
			if math.Abs(lo-w.Lo) > 1e-9 || math.Abs(hi-w.Hi) > 1e-9 {
				t.Fatalf("%s: widening the block interval [%g, %g] gave [%g, %g], want [%g, %g]", c.name, w.BlockLo, w.BlockHi, lo, hi, w.Lo, w.Hi)
			}
			factors += (hi - lo) / (w.BlockHi - w.BlockLo)
		}
		cb, c2, mf := float64(block)/trials, float64(twoWay)/trials, factors/trials
		t.Logf("%-28s coverage of the 95%% interval: windows alone %.3f, windows and sessions %.3f; mean widening x%.2f (%d trials)", c.name, cb, c2, mf, trials)
		if cb < c.blockMin || cb > c.blockMax {
			t.Errorf("%s: the block-only interval covered %.3f, outside [%.2f, %.2f]", c.name, cb, c.blockMin, c.blockMax)
		}
		if c2 < c.twoWay {
			t.Errorf("%s: the interval of windows and sessions covered %.3f, below %.2f", c.name, c2, c.twoWay)
		}
		if mf > c.meanFactorAtMost {
			t.Errorf("%s: mean widening x%.2f, more than x%.2f", c.name, mf, c.meanFactorAtMost)
		}
	}
}

func TestExpansion(t *testing.T) {
	// sqrt(n/(n-1)) t(n-1)/z at 95%: t(9) = 2.262, t(29) = 2.045, t(1) = 12.706
	cases := []struct{ n, want float64 }{{10, 1.2166}, {30, 1.0613}, {2, 9.1681}}
	for _, c := range cases {
		if got := Expansion(c.n, 0.95); math.Abs(got-c.want) > 1e-3 {
			t.Errorf("Expansion(%g) = %.4f, want %.4f", c.n, got, c.want)
		}
	}
	if !math.IsInf(Expansion(1, 0.95), 1) {
		t.Error("one unit says nothing about spread: the expansion must be +Inf")
	}
	if Expansion(1e6, 0.95) > 1.0001 {
		t.Error("many units need no expansion")
	}
}

func TestWeightedQuantileAndWiden(t *testing.T) {
	obs := []Obs{{Value: 1}, {Value: 2}, {Value: 3}, {Value: 4}}
	slices.SortFunc(obs, func(a, b Obs) int { return int(a.Value - b.Value) })
	if v, ok := WeightedQuantile(0.5)(obs, []float64{1, 1, 1, 1}); !ok || v != 2 {
		t.Errorf("median of 1..4 = %g, %v; want 2", v, ok)
	}
	if v, _ := WeightedQuantile(0.5)(obs, []float64{0, 0, 3, 1}); v != 3 {
		t.Errorf("weighted median = %g, want 3 (weights on 3 and 4 only)", v)
	}
	if _, ok := WeightedQuantile(0.9)(obs, []float64{0, 0, 0, 0}); ok {
		t.Error("a quantile with no weight was measured")
	}
	w := Widening{Center: 10, BlockLo: 9, BlockHi: 12, Lo: 7, Hi: 12, OK: true}
	if lo, hi := w.Widen(5, 4, 6); lo != 2 || hi != 6 {
		t.Errorf("Widen(5, 4, 6) = [%g, %g], want [2, 6]: the lower reach x3, the upper x1", lo, hi)
	}
	if lo, hi := w.Widen(5, 4, math.Inf(1)); lo != 2 || !math.IsInf(hi, 1) {
		t.Errorf("an open upper end must stay open: got [%g, %g]", lo, hi)
	}
	zero := Widening{Center: 1, BlockLo: 1, BlockHi: 1, Lo: 0.5, Hi: 1.5, OK: true}
	if lo, hi := zero.Widen(1, 1, 1); lo != 0.5 || hi != 1.5 {
		t.Errorf("a zero-width block interval widens by the two-way reach: got [%g, %g], want [0.5, 1.5]", lo, hi)
	}
	if lo, hi := (Widening{}).Widen(5, 4, 6); lo != 4 || hi != 6 {
		t.Errorf("no widening measured must leave the interval: got [%g, %g]", lo, hi)
	}
}
