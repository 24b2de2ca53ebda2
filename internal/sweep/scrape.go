package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
)

type inFlightSample struct {
	at     time.Duration
	n      int
	byTier map[string]int
}

// Samples returns a copy of the samples scraped so far.
func (r *Runner) Samples() []signal.Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]signal.Sample(nil), r.samples...)
}

// scrapeLoop samples the server on a grid of the scrape interval from the
// run's start, so window edges fall on samples.
func (r *Runner) scrapeLoop(ctx context.Context) {
	p, c := r.Plan, r.Clock
	for k := time.Duration(0); ; k++ {
		at := k * p.Scrape
		if c.Now() > at+p.Scrape {
			continue // fell behind: skip grid points that have passed
		}
		if err := c.SleepUntil(ctx, at); err != nil {
			return
		}
		inflight := r.Load.InFlight()
		var byTier map[string]int
		if tf, ok := r.Load.(tierFlight); ok {
			byTier = tf.InFlightByTier()
		}
		s, err := r.Source.Scrape(ctx, at)
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		r.inFlight = append(r.inFlight, inFlightSample{at: at, n: inflight, byTier: byTier})
		if err != nil {
			r.warnings = appendOnce(r.warnings, "scrape failed: "+err.Error())
			r.mu.Unlock()
			continue
		}
		r.samples = append(r.samples, s)
		r.mu.Unlock()
		r.sampled.Poke()
		if r.OnSample != nil {
			r.OnSample(s)
		}
	}
}

func appendOnce(xs []string, x string) []string {
	for _, v := range xs {
		if v == x {
			return xs
		}
	}
	return append(xs, x)
}

// awaitSample waits (bounded) until a sample at or after t has landed.
func (r *Runner) awaitSample(ctx context.Context, t time.Duration) error {
	c := r.Clock
	deadline := c.Now() + 2*r.Plan.Scrape + c.Modelled(2*time.Second)
	for {
		r.mu.Lock()
		n := len(r.samples)
		ok := n > 0 && r.samples[n-1].At >= t
		r.mu.Unlock()
		if ok {
			return nil
		}
		i, err := c.WaitFor(ctx, "sweep sample", deadline, r.sampled)
		if err != nil {
			return err
		}
		if i < 0 {
			break
		}
	}
	r.mu.Lock()
	r.warnings = appendOnce(r.warnings, fmt.Sprintf("no metrics sample landed at the end of a step (%s): the last window is judged on what there is", fmtDur(t)))
	r.mu.Unlock()
	return nil
}

func (r *Runner) meanInFlight(from, to time.Duration) (float64, map[string]float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	total, n := 0, 0
	tiers := map[string]float64{}
	for _, s := range r.inFlight {
		if s.at >= from && s.at < to {
			total += s.n
			n++
			for t, v := range s.byTier {
				tiers[t] += float64(v)
			}
		}
	}
	if n == 0 {
		return 0, nil
	}
	for t := range tiers {
		tiers[t] /= float64(n)
	}
	return float64(total) / float64(n), tiers
}
