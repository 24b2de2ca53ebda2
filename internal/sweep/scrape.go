package sweep

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/verdict"
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

// laterSource is a Source that reads the server now and may work the
// sample out afterwards, on a goroutine of its own (signal.Scraper's
// ScrapeLater on a virtual clock).
type laterSource interface {
	ScrapeLater(ctx context.Context, at time.Duration) *signal.Pending
}

// scrapeLoop samples the server on a grid of the scrape interval from the
// run's start, so window edges fall on samples.
func (r *Runner) scrapeLoop(ctx context.Context) {
	p, c := r.Plan, r.Clock
	var told <-chan struct{} // closed once OnSample has been told of the last sample
	defer func() {
		if told != nil {
			<-told
		}
	}()
	for k := time.Duration(0); ; k++ {
		at := k * p.Scrape
		if c.Now() > at+p.Scrape {
			continue // fell behind: skip grid points that have passed
		}
		if err := c.SleepUntil(ctx, at); err != nil {
			return
		}
		in := inFlightSample{at: at, n: r.Load.InFlight()}
		if tf, ok := r.Load.(tierFlight); ok {
			in.byTier = tf.InFlightByTier()
		}
		var pending *signal.Pending
		if ls, ok := r.Source.(laterSource); ok {
			pending = ls.ScrapeLater(ctx, at)
		} else {
			pending = signal.Finished(r.Source.Scrape(ctx, at))
		}
		if ctx.Err() != nil {
			return
		}
		told = r.land(pending, in, told)
	}
}

// land adds a scrape to the samples, as of now, and tells OnSample of it
// after the sample before it (told closed); it returns a channel closed
// once OnSample is told.
//
// On a wall clock it waits for the sample, adds it and tells OnSample at
// once. On a virtual clock r.mu is locked here and unlocked by a goroutine
// (off the clock) that adds the sample once it is worked out: whoever
// reads the samples from this modelled instant on (under r.mu) waits for
// that without moving the clock, and reads what it would have read had the
// sample been added now, while the clock moves on and the parsing runs
// beside it on another core. The waiters for a sample are poked at once,
// and find none new if the scrape failed. That goroutine then tells
// OnSample (which must not touch the clock), one sample at a time, in
// order.
func (r *Runner) land(pending *signal.Pending, in inFlightSample, told <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	if !r.Clock.Virtual() {
		defer close(done)
		s, err := pending.Wait()
		r.mu.Lock()
		ok := r.add(in, s, err)
		r.mu.Unlock()
		if ok {
			r.sampled.Poke()
			if r.OnSample != nil {
				r.OnSample(s)
			}
		}
		return done
	}
	r.mu.Lock() // unlocked by the goroutine below
	// labelled so a profile tells work beside the clock apart (docs/performance.md)
	go pprof.Do(context.Background(), pprof.Labels("beside", "land"), func(context.Context) {
		defer close(done)
		s, err := pending.Wait()
		ok := r.add(in, s, err)
		r.mu.Unlock()
		if told != nil {
			<-told
		}
		if ok && r.OnSample != nil {
			r.OnSample(s)
		}
	})
	r.sampled.Poke()
	return done
}

// add adds one scrape, under r.mu; it reports whether a sample was added.
func (r *Runner) add(in inFlightSample, s signal.Sample, err error) bool {
	r.inFlight = append(r.inFlight, in)
	if err != nil {
		r.warnings = appendOnce(r.warnings, "scrape failed: "+err.Error())
		r.failedScrapes++
		if r.failedScrapes >= GoneAfter && r.gone == nil {
			r.gone = &MetricsGone{Scrapes: r.failedScrapes, Err: err}
		}
		return false
	}
	r.failedScrapes = 0
	r.samples = append(r.samples, s)
	return true
}

// GoneAfter is how many scrapes in a row must fail for the metrics to be
// taken as gone: the sweep stops there.
const GoneAfter = 3

// MetricsGone is a sweep stopped because its metrics stopped answering:
// the steps judged before stand; the step under way, and every one not run,
// read no data.
type MetricsGone struct {
	Scrapes int   // the failed scrapes in a row when it was called
	Err     error // the last scrape's error: the URL and its answer
}

func (e *MetricsGone) Error() string {
	return fmt.Sprintf("the metrics stopped answering (%d scrapes in a row failed; the last: %v): the steps judged before stand, the step under way and the rest read no data",
		e.Scrapes, e.Err)
}
func (e *MetricsGone) Unwrap() error { return e.Err }

// metricsGone is the MetricsGone the scrapes so far call for, or nil.
func (r *Runner) metricsGone() *MetricsGone {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone
}

// goneVerdict is a step judged while its metrics went away (every part
// that did not fail on the windows it had reads no data) or while its load
// lost a shard's lanes (every part reads no data: it did not run its
// sessions).
func goneVerdict(j verdict.Step, gone error) verdict.Step {
	var metrics *MetricsGone
	keepFails := errors.As(gone, &metrics)
	j.Verdict = verdict.Pass
	for i := range j.Parts {
		if j.Parts[i].Verdict != verdict.Fail || !keepFails {
			j.Parts[i].Verdict = verdict.NoData
		}
		j.Verdict = verdict.Worse(j.Verdict, j.Parts[i].Verdict)
	}
	j.Warnings = append(j.Warnings, gone.Error())
	return j
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
		gone := r.gone != nil
		r.mu.Unlock()
		if ok || gone {
			return nil // gone: no sample is coming
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
