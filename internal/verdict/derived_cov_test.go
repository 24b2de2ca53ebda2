package verdict

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
)

// TestDerivedIntervalCoversFewWindows: a step whose interactivity is derived
// (SGLang) reads a P90 over its windows' mean time per output token, and a
// step has 10-25 windows. Windows drawn from a known distribution
// (log-normal means around 0.1 s per token, log-sd 0.15, 800-1200 tokens
// each), 200 runs at each count: the interval must hold the true P90 at
// least 90% of the time without covering by width alone (half-width at
// most 1.7 times the spread of the estimate between runs), and the value
// must not read fast. With the plain P90 (the 9th of 10 windows) and the
// bootstrap's slow side as drawn (no resample reaches past the slowest
// window), the intervals covered 71% (10 windows), 82.5% (15) and 92.5%
// (25); now 95%, 94% and 97.5%.
func TestDerivedIntervalCoversFewWindows(t *testing.T) {
	const s, runs = 0.15, 200
	truth := 1 / (0.1 * math.Exp(1.2816*s)) // tokens/s that 90% of windows beat
	for _, n := range []int{10, 15, 25} {
		t.Run(fmt.Sprint(n, " windows"), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(n)))
			covered := 0
			var centers []float64
			half := 0.0
			for r := range runs {
				ws := make([]signal.Window, n)
				for i := range ws {
					tok := 800 + 400*rng.Float64()
					h := hist(itlBounds, []float64{0, 0, 0, 0, 0, 0, tok, 0, 0, 0})
					h.Sum = tok * 0.1 * math.Exp(s*rng.NormFloat64())
					ws[i] = signal.Window{
						Start: time.Duration(i) * time.Minute, End: time.Duration(i+1) * time.Minute,
						Hist:    map[string]stats.Histogram{signal.TTFT: hist(ttftBounds, fastTTFT), signal.ITL: h},
						Counter: map[string]float64{signal.HTTP4xx: 0, signal.HTTP5xx: 0, signal.RequestsAborted: 0},
					}
				}
				o := DefaultOptions()
				o.Seed = uint64(r + 1)
				p, _ := Judge(Bar{TTFTP90: 5.3, InteractivityP90: 5, ErrorRate: 0.02}, ws, load(n, 100, 100), o).Part(PartInteractivity)
				if p.Value.Lo <= truth && truth <= p.Value.Hi {
					covered++
				}
				centers = append(centers, p.Value.Center)
				half += (p.Value.Hi - p.Value.Lo) / 2 / runs
			}
			mean, sd := meanSD(centers)
			calibrated := 1.96 * sd
			t.Logf("truth %.3f tokens/s, mean value %.3f; covered %d of %d; half-width %.3f, calibrated %.3f", truth, mean, covered, runs, half, calibrated)
			if float64(covered) < 0.9*runs {
				t.Errorf("covered %d of %d, want at least 90%%", covered, runs)
			}
			if half > 1.7*calibrated {
				t.Errorf("half-width %.3f is %.2f times the calibrated %.3f: covers by being wide", half, half/calibrated, calibrated)
			}
			if mean > truth*1.025 {
				t.Errorf("the value averages %.3f against a truth of %.3f: it reads fast", mean, truth)
			}
		})
	}
}

func meanSD(xs []float64) (float64, float64) {
	m, v := 0.0, 0.0
	for _, x := range xs {
		m += x / float64(len(xs))
	}
	for _, x := range xs {
		v += (x - m) * (x - m) / float64(len(xs)-1)
	}
	return m, math.Sqrt(v)
}
