package calibrate

import "math"

// iterClock counts the engine's iterations over time, as a fitted cost
// model says they went: fast while few short contexts decode, slow while
// long prompts are computed beside them. A request decodes one token an
// iteration and computes its prompt a chunk an iteration, so its progress
// is even in iterations, not in seconds; the second pass of the fit spreads
// each request's work by this clock. A nil clock is wall time.
type iterClock struct {
	t0, dt float64
	cum    []float64 // iterations from t0 to the start of each bin
}

// at is the iterations counted up to t.
func (c *iterClock) at(t float64) float64 {
	if c == nil {
		return t
	}
	x := (t - c.t0) / c.dt
	switch {
	case x <= 0:
		return x * c.cum[1] // before the first bin: its rate
	case x >= float64(len(c.cum)-1):
		n := len(c.cum) - 1
		return c.cum[n] + (x-float64(n))*(c.cum[n]-c.cum[n-1])
	}
	i := int(x)
	return c.cum[i] + (x-float64(i))*(c.cum[i+1]-c.cum[i])
}

// maxBins bounds the clock's resolution for long runs.
const maxBins = 200000

// newIterClock builds the clock from coefficients b (decode base, seconds
// per context token, seconds per prompt token, seconds per attention
// pair) and the iteration budget. While a prompt longer than the budget is
// computed, every iteration is one full chunk of it, so iterations come at
// its chunks over its stretch. Otherwise, in each short bin, an iteration
// costs the base and its decodes' context, stretched by the share of the
// bin the short prompts computed in it take; bins without decodes run at
// the base's pace.
func newIterClock(spans []span, b []float64, budget int) *iterClock {
	if len(spans) == 0 {
		return nil
	}
	t0, t1 := math.Inf(1), math.Inf(-1)
	for _, s := range spans {
		t0, t1 = min(t0, s.arrive), max(t1, s.last)
	}
	dt := max(0.02, (t1-t0)/maxBins)
	n := int(math.Ceil((t1-t0)/dt)) + 1
	decoders, ctx, busy, chunks := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	bin := func(t float64) int { return min(n-1, max(0, int((t-t0)/dt))) }
	for _, s := range spans {
		if u := float64(s.uncached()); u > 0 {
			// seconds of prompt work per second of the stretch
			d := s.first - s.prefillStart
			cost := u*b[2] + u*(float64(s.cached)+u/2)*b[3]
			switch {
			case u > float64(budget) && d > dt:
				for i := bin(s.prefillStart); i <= bin(s.first); i++ {
					chunks[i] += u / float64(budget) / d
				}
			case d <= dt:
				busy[bin(s.first)] += cost / dt
			default:
				for i := bin(s.prefillStart); i <= bin(s.first); i++ {
					busy[i] += cost / d
				}
			}
		}
		if k := float64(s.decodeTokens()); k > 0 && s.last > s.first {
			for i := bin(s.first); i <= bin(s.last); i++ {
				x := frac(t0+(float64(i)+0.5)*dt, s.first, s.last)
				decoders[i]++
				ctx[i] += float64(s.prompt) + k*x
			}
		}
	}
	c := &iterClock{t0: t0, dt: dt, cum: make([]float64, n+1)}
	for i := range n {
		free := max(0.05, 1-busy[i]) // the share of the bin left to the base and decodes
		iter := (b[0] + b[1]*ctx[i]) / free
		if decoders[i] == 0 {
			iter = b[0] / free
		}
		rate := 0.0
		if iter > 0 {
			rate = 1 / iter
		}
		if chunks[i] > 0 {
			rate = chunks[i]
		}
		c.cum[i+1] = c.cum[i] + rate*dt
	}
	if c.cum[n] <= 0 {
		return nil
	}
	return c
}

// fracIn is how far t is through [a, b] in the clock's iterations.
func (c *iterClock) fracIn(t, a, b float64) float64 {
	if c == nil {
		return frac(t, a, b)
	}
	if b-a <= 1e-9 {
		return frac(t, a, b)
	}
	ia, ib := c.at(a), c.at(b)
	if ib-ia <= 0 {
		return frac(t, a, b)
	}
	return min(1, max(0, (c.at(t)-ia)/(ib-ia)))
}

// back is the time n iterations before t.
func (c *iterClock) back(t, n float64) float64 {
	target := c.at(t) - n
	lo, hi := c.t0-c.dt, t
	if c.at(lo) > target {
		return lo
	}
	for range 50 {
		mid := (lo + hi) / 2
		if c.at(mid) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// tighten moves each prefill's start to no earlier than the iterations
// its chunks take before its first token (a budget of prompt tokens an
// iteration), so a request that waited for KV blocks or a free slot has
// its prompt computed when it was, not over the wait.
func tighten(spans []span, clk *iterClock, budget int) []span {
	out := append([]span(nil), spans...)
	if clk == nil {
		return out
	}
	for i := range out {
		s := &out[i]
		if u := s.uncached(); u > 0 {
			chunks := math.Ceil(float64(u) / float64(budget))
			s.prefillStart = min(s.first, max(s.prefillStart, clk.back(s.first, chunks)))
		}
	}
	return out
}
