package verdict

import (
	"cmp"
	"math"
	"slices"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
)

// Request is what the client saw of one planned turn of a judged step, for
// the part of the intervals the server's windows cannot carry: which
// sessions the run drew. Server histograms are kept per window, so
// resampling them sees how windows vary, not that every window held the
// same few sessions; the client's records carry both.
type Request struct {
	Window  int    // index of the judged window the turn was planned in
	Session string // the session (trace id) whose play it belongs to
	// Tier is the session's tier of the mix (heavy, light): the run fixes
	// how many lanes each tier has, so sessions are resampled within it.
	Tier string
	// TTFT is seconds to the first token; 0 when there was none.
	TTFT float64
	// TPOT is seconds per output token after the first; 0 when fewer than
	// two tokens came.
	TPOT   float64
	Failed bool // an error: refusal, server error, timeout, abort, not reached or unsent
	// Uncached is the prompt tokens the engine had to compute (not served
	// from its prefix cache): the prefill the turn put on the engine, which
	// slows the streams beside it (judge.pressure). 0 when unknown.
	Uncached int
}

// Spread says which sources of variance a part's interval carries.
type Spread struct {
	Windows int `json:"windows"` // windows resampled
	Block   int `json:"block"`   // in moving blocks of this many
	// Expansion is the factor the window interval's reach was widened by
	// for having few blocks (stats.Expansion).
	Expansion float64 `json:"expansion"`
	// Sessions is how many sessions the client's records of the step hold;
	// 0 when there were no records to resample, and then the interval does
	// not carry which sessions the run drew.
	Sessions int `json:"sessions,omitempty"`
	// Below and Above are the factors by which resampling sessions as well
	// as windows stretched the interval's reach below and above its value
	// (1: no further).
	Below float64 `json:"below,omitempty"`
	Above float64 `json:"above,omitempty"`
	// PressureBelow and PressureAbove are the reach, on the log scale,
	// added below and above for how much prefill the sessions happened to
	// send (judge.pressure; 0: none).
	PressureBelow float64 `json:"pressure_below,omitempty"`
	PressureAbove float64 `json:"pressure_above,omitempty"`
}

// JudgeWith is Judge with the client's records of the step's turns, so that
// every interval also carries which sessions the run drew: the server's
// window bootstrap is stretched by what resampling the client's records by
// session as well as by window adds (stats.ClusterWidening). Without records
// it is Judge.
func JudgeWith(bar Bar, windows []signal.Window, load []LoadWindow, reqs []Request, o Options) Step {
	return judgeStep(bar, windows, load, reqs, o)
}

// Judge gives the step's verdict from its signal windows and the load the
// generator planned in the same windows.
func Judge(bar Bar, windows []signal.Window, load []LoadWindow, o Options) Step {
	return judgeStep(bar, windows, load, nil, o)
}

// clientQuantity is one per-request quantity of the client's records.
type clientQuantity int

const (
	clientTTFT clientQuantity = iota
	clientTPOT
	clientFailed
)

// widening measures, on the client's records, how much resampling sessions
// as well as windows stretches the interval of the quantity's statistic.
// Latencies are taken on the log scale, where their spread is about
// symmetric (a quantile of the logs is the log of the quantile).
func (j judge) widening(q clientQuantity, stat stats.Weighted, block int) stats.Widening {
	if len(j.reqs) == 0 {
		return stats.Widening{}
	}
	ids := map[string]int{}
	tiers := map[string]int{}
	var obs []stats.Obs
	for _, r := range j.reqs {
		v := 0.0
		switch q {
		case clientTTFT:
			if r.Failed || !(r.TTFT > 0) {
				continue
			}
			v = math.Log(r.TTFT)
		case clientTPOT:
			if r.Failed || !(r.TPOT > 0) {
				continue
			}
			v = math.Log(r.TPOT)
		case clientFailed:
			if r.Failed {
				v = 1
			}
		}
		if r.Window < 0 || r.Window >= len(j.windows) {
			continue
		}
		c, ok := ids[r.Session]
		if !ok {
			c = len(ids)
			ids[r.Session] = c
		}
		t, ok := tiers[r.Tier]
		if !ok {
			t = len(tiers)
			tiers[r.Tier] = t
		}
		obs = append(obs, stats.Obs{Window: r.Window, Cluster: c, Stratum: t, Value: v})
	}
	slices.SortStableFunc(obs, func(a, b stats.Obs) int { return cmp.Compare(a.Value, b.Value) })
	o := j.boot(block)
	o.Resamples = min(o.Resamples, 1000) // a ratio of reaches, not an interval: fewer resamples do
	return stats.ClusterWidening(obs, len(j.windows), len(ids), stat, o)
}

// blockFor is the moving-block length for a part whose windows score as
// scores (stats.AutoBlockLength reads them), or the length the options fix.
func (j judge) blockFor(scores []float64) int {
	if j.o.Block > 0 {
		return j.o.Block
	}
	return stats.AutoBlockLength(scores)
}

// boot is the bootstrap options with moving blocks of block windows.
func (j judge) boot(block int) stats.BootstrapOptions {
	o := j.o.bootstrap()
	o.Block = block
	return o
}

// spread widens a window bootstrap interval [lo, hi] of value v over n
// windows resampled in moving blocks of block (blockFor's):
// its reach is expanded for the few blocks it resampled, then
// stretched by what resampling the client's records by session adds (w),
// on the log scale when logScale (a latency, v > 0; w must be of logs too),
// and for a latency widened in quadrature on each side by the log-scale
// reach of the prefill the sessions happened to send (judge.pressure).
// ok is false when there are too few blocks to say anything (fewer than 2).
func (j judge) spread(v, lo, hi float64, n, block int, w stats.Widening, press [2]float64, logScale bool) (float64, float64, Spread, bool) {
	block = max(1, min(block, n))
	s := Spread{Windows: n, Block: block, Expansion: stats.Expansion(float64(n)/float64(block), j.o.Confidence)}
	if math.IsInf(s.Expansion, 1) {
		s.Expansion = 0
		return v, v, s, false
	}
	reach := func(d float64) float64 {
		if !(d > 0) {
			return 0
		}
		return d * s.Expansion
	}
	if logScale && v > 0 && lo > 0 {
		to := func(x float64) float64 { return math.Log(x) }
		lv := to(v)
		llo, lhi := lv-reach(lv-to(lo)), lv+reach(to(hi)-lv)
		if w.OK {
			s.Sessions = w.Clusters
			wlo, whi := w.Widen(lv, llo, lhi)
			s.Below, s.Above = stretch(lv-llo, lv-wlo), stretch(lhi-lv, whi-lv)
			llo, lhi = wlo, whi
		}
		if press[0] > 0 || press[1] > 0 {
			s.PressureBelow, s.PressureAbove = press[0], press[1]
			llo = lv - math.Hypot(lv-llo, press[0])
			lhi = lv + math.Hypot(lhi-lv, press[1])
		}
		return math.Exp(llo), math.Exp(lhi), s, true
	}
	lo, hi = v-reach(v-lo), v+reach(hi-v)
	if w.OK && !logScale {
		s.Sessions = w.Clusters
		wlo, whi := w.Widen(v, lo, hi)
		s.Below, s.Above = stretch(v-lo, v-wlo), stretch(hi-v, whi-v)
		lo, hi = wlo, whi
	}
	return lo, hi, s, true
}

// stretch is the factor a side's reach grew by, from was to now (1 when it
// did not grow; 0 when it started at nothing and grew).
func stretch(was, now float64) float64 {
	switch {
	case !(now > was):
		return 1
	case !(was > 0):
		return 0
	}
	return now / was
}
