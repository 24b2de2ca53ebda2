// Package sweep runs the ladder: it holds each step's concurrent sessions
// through a warm-up and a judged time, judges the step from the server's
// metrics, stops at the first step that misses the bar, and turns the judged
// steps into capacity with an interval and its cost.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// Load is the load generator as the sweep drives it.
type Load interface {
	SetSessions(n int)
	SetTag(load.Tag)
	InFlight() int
	Stop(grace time.Duration)
}

// primer is a Load that reports how its lanes' warm-up is going.
type primer interface {
	Priming() load.Priming
}

// lossy is a Load spread over processes, one of which can be lost
// (shard.Coordinator): the step under way then ran short of its lanes.
type lossy interface {
	Lost() error
}

// loadLost is why the load is short of its lanes, or nil.
func (r *Runner) loadLost() error {
	if l, ok := r.Load.(lossy); ok {
		return l.Lost()
	}
	return nil
}

// tierFlight is a Load that reports requests in flight per tier.
type tierFlight interface {
	InFlightByTier() map[string]int
}

// Source gives one sample of the server's metrics.
type Source interface {
	Scrape(ctx context.Context, at time.Duration) (signal.Sample, error)
}

// Plan is the sweep's part of the run file, in modelled time.
type Plan struct {
	Ladder []int
	Warmup time.Duration
	// Step is a step's judged time; with MaxStep beyond it, its minimum.
	Step time.Duration
	// MaxStep is the longest a step's judged time may run while a part
	// reads too close and could still be decided (extend.go); 0 or at most
	// Step keeps every step at Step.
	MaxStep time.Duration
	// Budget is the sweep's share of the GPU window, from its start: no
	// step is extended past it (0: no bound but MaxStep).
	Budget  time.Duration
	Window  time.Duration
	Scrape  time.Duration
	Drain   time.Duration
	Bar     verdict.Bar
	Options verdict.Options
	// Repeat re-runs the steps either side of the crossing and judges each on
	// both runs' windows together.
	Repeat bool
	// Adaptive picks each next step to halve the capacity interval (doubling,
	// then bisecting within the ladder's range) instead of climbing the ladder;
	// it stops when the held and missed steps are Resolution sessions apart.
	Adaptive   bool
	Resolution int
	// Kill ends a step early when the recipe clearly cannot carry it.
	Kill Kill
	// KVFull stops the sweep after a step whose KV cache use averaged at least
	// this share (0 turns the stop off).
	KVFull float64
	// FirstIndex numbers the first step of this sweep (non-zero on resume);
	// Previous holds steps judged before, counted in capacity.
	FirstIndex int
	Previous   []StepResult
}

// Runner runs one sweep.
type Runner struct {
	Plan   Plan
	Clock  *timescale.Clock
	Load   Load
	Source Source
	Book   *Book
	// OnSample and OnStep persist what the sweep learns as it goes; either may be nil.
	// OnSample is called one sample at a time, in order; on a virtual clock
	// it runs off the clock (beside it), so it must not wait on the clock.
	OnSample func(signal.Sample)
	// OnStep is told each judged step before it is printed or counted; an
	// error (the step could not be kept) stops the sweep there, the step
	// left out, and Run returns that error.
	OnStep func(StepResult) error
	// Stopped, if set, is asked at each scrape of a judged time whether the
	// sweep must stop (the run directory could not be written): an error
	// abandons the step under way, which is neither judged nor kept, and
	// Run returns it.
	Stopped func() error
	// OnStepStart, if set, is told each step's index and sessions as it starts.
	OnStepStart func(index, sessions int)
	// Progress receives one line per event for people watching; may be nil.
	Progress io.Writer
	// Extra returns bar parts measured outside the server's metrics for a
	// step (e.g. tool calls under load); they join the step's verdict.
	Extra func(index int) []verdict.Part

	mu      sync.Mutex
	current Current
	// primeTimedOut is how many primings had timed out by the last step's check.
	primeTimedOut int
	samples       []signal.Sample
	inFlight      []inFlightSample
	warnings      []string
	sampled       *timescale.Signal // poked when a sample lands
	deadline      time.Duration     // the end of Plan.Budget on the clock; 0: none
	reserve       time.Duration     // what the steps after this one need at their minimum length
	ramp          bool              // the next step starts from a drained engine
	// failedScrapes counts the scrapes in a row that failed; gone is set
	// once GoneAfter have (scrape.go)
	failedScrapes int
	gone          *MetricsGone
}

// Current is the step running now.
type Current struct {
	Step       int // 1-based; 0 when no step runs
	Sessions   int
	MeasureEnd time.Duration
}

// Current reports the step running now.
func (r *Runner) Current() Current {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current
}

func (r *Runner) logf(format string, args ...any) {
	if r.Progress != nil {
		fmt.Fprintf(r.Progress, format+"\n", args...)
	}
}

// Run runs the ladder until a step misses the bar or the ladder ends, repeats
// the steps either side of the crossing when asked, then stops the load and
// waits for the engine to be idle. A cancelled ctx abandons the step in
// flight; what was judged is returned.
func (r *Runner) Run(ctx context.Context) (Result, error) {
	p := r.Plan
	if p.Scrape <= 0 || p.Window <= 0 || p.Step < p.Window {
		return Result{}, errors.New("sweep plan: scrape, window and step times must be positive and step >= window")
	}
	c := r.Clock
	r.sampled = c.NewSignal()
	if p.Budget > 0 {
		r.deadline = c.Now() + p.Budget
	}
	sctx, stopScrape := c.WithCancel(ctx)
	scrapeDone := c.NewLatch()
	c.Go(func() { defer scrapeDone.Close(); r.scrapeLoop(sctx) })
	defer func() {
		stopScrape()
		_, _ = c.WaitFor(context.Background(), "sweep scrape loop", -1, scrapeDone)
	}()

	var res Result
	var runErr error
	res.Steps = append(res.Steps, p.Previous...)
	res.StopReason = "the ladder ended"
	index := p.FirstIndex
	run := func(n, repeatOf int) (StepResult, bool) {
		step, err := r.step(ctx, index, n, repeatOf)
		index++
		if errors.Is(err, ErrWarmupTooShort) {
			res.StopReason, runErr = err.Error(), err
			return step, false
		}
		if err != nil {
			res.StopReason = "interrupted: " + err.Error()
			if ctx.Err() == nil { // Stopped said stop: it is why
				res.StopReason, runErr = err.Error(), err
			}
			return step, false
		}
		var gone error
		if g := r.metricsGone(); g != nil {
			gone = g
		} else if lost := r.loadLost(); lost != nil {
			gone = lost
		}
		if gone != nil {
			// no data on its own: never pooled with an earlier run's
			step.Judged = goneVerdict(step.Judged, gone)
		} else if repeatOf >= 0 {
			step = r.pool(step, res.Steps)
		}
		if r.Extra != nil {
			step.Judged = WithParts(step.Judged, r.Extra(step.Index)...)
		}
		if r.OnStep != nil {
			if err := r.OnStep(step); err != nil {
				res.StopReason, runErr = err.Error(), err
				return step, false
			}
		}
		res.Steps = append(res.Steps, step)
		r.logf("step %d: %s", step.Index+1, describeStep(step))
		if gone != nil {
			res.StopReason, runErr = gone.Error(), gone
			return step, false
		}
		return step, true
	}
	seq := newSequence(p)
	missedAt := 0 // the sessions of the last step that missed, while bisecting
	descents := 0
	for {
		n, more := seq.next()
		if !more {
			break
		}
		if p.Adaptive && !r.keepsRoomBelow(res.Steps, n, missedAt > 0 && n < missedAt) {
			res.Warnings = append(res.Warnings, fmt.Sprintf("no step has held the bar: %d sessions did not run, so that the GPU window keeps room for a step below the lowest", n))
			break
		}
		if missedAt > 0 && n < missedAt {
			// bisecting down from a step that missed: as before a repeat, the
			// lower step must not inherit the missed step's backlog
			// (and, as a repeat does, brings its lanes back in batches)
			// Its lanes draw fresh plays, as a repeat's do: brought back
			// replaying the same traces and markers, they met a prefix cache
			// warm with their own prompts (reference 0 bisecting down from
			// 15 to 12 read 10.3 tok/s, every request at 0.1 s per token or
			// less, where the truth is 7.7; issue 21).
			descents++
			reseed(r.Load, descentEpoch+descents)
			if pf := r.drain(ctx); !pf.Idle {
				res.Warnings = append(res.Warnings, fmt.Sprintf("before %d sessions, after %d missed: %s; it starts on a backlog", n, missedAt, pf.Detail))
			}
			r.ramp = true
		}
		r.reserve = seq.left() * (p.Warmup + p.Step)
		step, ok := run(n, -1)
		if !ok {
			break
		}
		why := missed(p, step)
		seq.judged(n, why != "")
		missedAt = 0
		if why != "" {
			missedAt = n
			res.StopReason = why
			if !p.Adaptive {
				break
			}
		}
	}
	if p.Adaptive {
		res.StopReason = seq.story()
	}
	lo, hi := seq.bracket()
	crossed := -1
	if lo > 0 && hi > 0 {
		crossed = 1
	}
	if p.Repeat && crossed > 0 && runErr == nil && ctx.Err() == nil {
		// a repeat must not inherit the backlog of the step that missed:
		// stop the lanes and let the engine drain before climbing again
		reseed(r.Load, 1) // the repeats draw fresh plays: other start points, new markers
		if pf := r.drain(ctx); !pf.Idle {
			res.Warnings = append(res.Warnings, "before the repeats: "+pf.Detail+"; they start on a backlog")
		}
		// the steps either side of the crossing run again; each verdict then
		// rests on both runs
		repeated, unprimed := true, ""
		for k, n := range []int{lo, hi} {
			if p.Adaptive && !r.keepsRoomBelow(res.Steps, n, true) {
				res.Warnings = append(res.Warnings, fmt.Sprintf("no step has held the bar: the repeat of %d sessions did not run, so that the GPU window keeps room for a step below the lowest", n))
				res.StopReason += "; the repeats were left out for a step below the lowest"
				repeated = false
				break
			}
			first := lastAt(res.Steps, n)
			r.reserve = time.Duration(1-k) * (p.Warmup + p.Step)
			stop := res.StopReason
			if _, ok := run(n, first); !ok {
				if errors.Is(runErr, ErrWarmupTooShort) && ctx.Err() == nil {
					// the climb primed this step in its warm-up; a repeat
					// ramped back from a drained engine that did not is
					// left out, not the run: its first run's verdict stands
					res.Warnings = append(res.Warnings, fmt.Sprintf("the repeat of %d sessions was not judged (%v): its first run's verdict stands", n, runErr))
					res.StopReason, runErr, unprimed = stop, nil, fmt.Sprintf(" (%d sessions' repeat did not prime in its warm-up)", n)
					continue
				}
				repeated = false // the stop reason says why
				break
			}
		}
		if repeated {
			res.StopReason += "; the steps either side were repeated" + unprimed
			if m, ok := r.settleBelow(ctx, res.Steps, lo, &res.Warnings); ok {
				if _, ok := run(m, lastAt(res.Steps, m)); ok {
					res.StopReason += fmt.Sprintf(", and %d sessions, below them, as no step had held", m)
				}
			}
		}
	}
	if runErr == nil && len(p.Ladder) > 1 {
		// nothing held: look below the lowest step, as far as the window
		// allows (a ladder of one step checks that step, it searches nothing)
		first, down := 0, 0
		if len(res.Steps) > 0 {
			first = res.Steps[0].Sessions
		}
		var ran []string
		for {
			m, ok := r.stepDown(ctx, res.Steps, first, down, &res.Warnings)
			if !ok {
				break
			}
			down++
			if _, ok := run(m, -1); !ok {
				break
			}
			ran = append(ran, strconv.Itoa(m))
		}
		if len(ran) > 0 {
			res.StopReason += fmt.Sprintf("; no step had held, so %s sessions ran below the lowest step", strings.Join(ran, " and "))
		}
	}
	res.Capacity = CapacityOf(Points(res.Steps))
	res.PostFlight = r.postFlight(ctx)
	r.mu.Lock()
	res.Warnings = append(res.Warnings, r.warnings...)
	r.mu.Unlock()
	if !res.PostFlight.Idle {
		res.Warnings = append(res.Warnings, "post-flight: "+res.PostFlight.Detail)
	}
	if runErr == nil {
		runErr = ctx.Err()
	}
	return res, runErr
}

// missed says why a step ends the climb, or "" when it held.
func missed(p Plan, step StepResult) string {
	n := step.Sessions
	switch {
	case step.Killed != "":
		return fmt.Sprintf("kill switch at %d sessions: %s", n, step.Killed)
	case step.Judged.Verdict == verdict.Fail || step.Judged.Verdict == verdict.NoData:
		return fmt.Sprintf("step %d (%d sessions) read %s", step.Index+1, n, step.Judged.Verdict)
	case p.KVFull > 0 && step.KVCacheMean >= p.KVFull:
		return fmt.Sprintf("the KV cache stayed full at %d sessions (%.0f%% on average)", n, 100*step.KVCacheMean)
	case p.KVFull > 0 && step.KVFullWaitingS > 0:
		return fmt.Sprintf("the KV cache filled at %d sessions: at or above %.0f%% with requests waiting for %s (peak %.0f%%, mean %.0f%%)",
			n, 100*p.KVFull, fmtDur(time.Duration(step.KVFullWaitingS*float64(time.Second))), 100*step.KVCachePeak, 100*step.KVCacheMean)
	case step.WaitingIdleS > 0:
		return fmt.Sprintf("at %d sessions requests waited with nothing running for %s: the engine admitted nothing (a KV cache too small for them, or a stall)",
			n, fmtDur(time.Duration(step.WaitingIdleS*float64(time.Second))))
	}
	return ""
}

// step runs one step: warm-up, then the judged time on the scrape grid,
// watched by the kill switch.
func (r *Runner) step(ctx context.Context, i, n, repeatOf int) (StepResult, error) {
	p, c := r.Plan, r.Clock
	start := c.Now()
	if r.OnStepStart != nil {
		r.OnStepStart(i, n)
	}
	r.Load.SetTag(load.Tag{Step: i, Sessions: n, Phase: load.PhaseWarmup})
	ramp := r.ramp
	r.ramp = false
	if (repeatOf >= 0 || ramp) && len(p.Ladder) > 0 {
		// a repeat (or a bisection step below a miss) starts from a drained
		// engine: bring the lanes back in batches of the ladder's first step,
		// one warm-up each, as the climb did, so their cold prompts do not
		// all queue at once
		batch := max(p.Ladder[0], 1)
		for k := 1; k <= rampBatches(p, n); k++ {
			r.Load.SetSessions(k * batch)
			if err := c.Sleep(ctx, p.Warmup); err != nil {
				return StepResult{}, err
			}
		}
	}
	r.Load.SetSessions(n)
	measureStart := alignUp(c.Now()+p.Warmup, p.Scrape)
	r.logf("step %d: %d sessions, warm-up until %s, judged %s", i+1, n, fmtDur(measureStart), fmtDur(p.Step))
	if err := c.SleepUntil(ctx, measureStart); err != nil {
		return StepResult{}, err
	}
	var warm *Warmup
	if pr, ok := r.Load.(primer); ok {
		pm := pr.Priming()
		warm = &Warmup{Primed: pm.Started, Pending: pm.Pending, Failed: pm.Failed, LongestS: pm.Longest.Seconds()}
		if pm.Pending > 0 {
			return StepResult{Index: i, Sessions: n, Warmup: warm}, fmt.Errorf("%w: %d lanes were still priming when step %d's judged time began (the longest priming so far took %.0fs); raise sweep.warmup_s",
				ErrWarmupTooShort, pm.Pending, i+1, pm.Longest.Seconds())
		}
		// a lane whose priming timed out joins the judged time cold: its
		// first turn would be judged as a cold prefill (a priming the server
		// refused is the recipe's failure, and the step's errors show it)
		if late := pm.TimedOut - r.primeTimedOut; late > 0 {
			return StepResult{Index: i, Sessions: n, Warmup: warm}, fmt.Errorf("%w: %d lanes' priming timed out during step %d's warm-up (the longest took %.0fs), so they would join the judged time cold; raise sweep.warmup_s and workload.prime_timeout_s",
				ErrWarmupTooShort, late, i+1, pm.Longest.Seconds())
		}
		r.primeTimedOut = pm.TimedOut
	}
	r.Load.SetTag(load.Tag{Step: i, Sessions: n, Phase: load.PhaseMeasure})
	measureEnd := measureStart + p.Step
	r.mu.Lock()
	r.current = Current{Step: i + 1, Sessions: n, MeasureEnd: measureEnd}
	r.mu.Unlock()
	killed, killedBy := "", ""
	limit := r.limitOf(measureStart)
	var extended []string
	for t := measureStart + p.Scrape; t <= measureEnd; t += p.Scrape {
		if err := c.SleepUntil(ctx, t); err != nil {
			return StepResult{}, err
		}
		if r.metricsGone() != nil || r.loadLost() != nil {
			measureEnd = t // the rest of the step would read nothing, or not its load
			break
		}
		if r.Stopped != nil {
			if err := r.Stopped(); err != nil {
				return StepResult{}, err
			}
		}
		if killed, killedBy = r.kill(n, measureStart, t); killed != "" {
			r.awaitSample(ctx, t)
			measureEnd = t
			r.logf("step %d: kill switch: %s", i+1, killed)
			break
		}
		if t == measureEnd && limit > measureEnd {
			// at the end of the judged time so far: go on while a part
			// is too close and could still be decided by the limit
			if err := r.awaitSample(ctx, t); err != nil {
				return StepResult{}, err
			}
			next, why := r.extendTo(i, n, measureStart, t, limit)
			if next > t {
				measureEnd = next
				extended = append(extended, why)
				r.mu.Lock()
				r.current.MeasureEnd = measureEnd
				r.mu.Unlock()
				r.logf("step %d: judged time extended to %s: %s", i+1, fmtDur(measureEnd-measureStart), why)
			}
		}
	}
	// the next step's warm-up starts now; records sent from here are its own
	r.Load.SetTag(load.Tag{Step: i + 1, Sessions: n, Phase: load.PhaseWarmup})
	if err := r.awaitSample(ctx, measureEnd); err != nil {
		return StepResult{}, err
	}
	step := StepResult{
		Index: i, Sessions: n, RepeatOf: repeatOf, Killed: killed, KilledBy: killedBy, Warmup: warm,
		Start: start.Seconds(), MeasureStart: measureStart.Seconds(), End: measureEnd.Seconds(),
	}
	if len(extended) > 0 {
		step.Extended = fmt.Sprintf("judged %s instead of %s: %s", fmtDur(measureEnd-measureStart), fmtDur(p.Step), extended[0])
	}
	step.Load.InFlight, step.Load.InFlightByTier = r.meanInFlight(measureStart, measureEnd)
	return JudgeStep(p, step, r.Samples(), r.Book.Step(i, load.PhaseMeasure)), nil
}

func alignUp(t, grid time.Duration) time.Duration {
	return (t + grid - 1) / grid * grid
}

func fmtDur(d time.Duration) string {
	return (time.Duration(math.Round(d.Seconds())) * time.Second).String()
}

func describeStep(s StepResult) string {
	out := fmt.Sprintf("%d sessions  %-9s", s.Sessions, s.Judged.Verdict)
	for _, p := range s.Judged.Parts {
		out += fmt.Sprintf("  %s %s", p.Name, p.Verdict)
	}
	return out + fmt.Sprintf("  (%d turns, %.1f in flight)", s.Load.Planned, s.Load.InFlight)
}
