package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/headroom-bench/headroom/internal/verdict"
)

// settleBelow picks the step to run once more after the repeats either
// side of the crossing when, pooled, no step at or below lo held: the
// highest step below lo that read too close, most often a first step with
// too few turns to clear the error bar (a heavy-only ladder: 0 errors in 89
// turns of 4 sessions, Wilson 0-4.1% against 2%) that the climb left behind
// when it went on to the crossing. Without it such a sweep ends "not
// established, no step held the bar" though its first step is far within
// the bar; pooled with its first run it is decided. It runs only when the
// sweep's budget still holds it at its minimum length (with the ramp back
// from a drained engine), so the plan's worst case does not change. It
// stops the lanes and waits for the engine to drain first, as before the
// repeats; a backlog left is a warning in warnings.
func (r *Runner) settleBelow(ctx context.Context, steps []StepResult, lo int, warnings *[]string) (int, bool) {
	pts := Points(steps)
	m := 0
	for _, p := range pts {
		switch {
		case p.Sessions > lo:
		case p.Judged.Verdict == verdict.Pass:
			return 0, false // a step held: the bracket stands
		case p.Sessions < lo && p.Judged.Verdict == verdict.TooClose:
			m = max(m, p.Sessions)
		}
	}
	if m == 0 || ctx.Err() != nil {
		return 0, false
	}
	if pf := r.drain(ctx); !pf.Idle {
		*warnings = append(*warnings, fmt.Sprintf("before %d sessions again: %s; it starts on a backlog", m, pf.Detail))
	}
	p := r.Plan
	need := rampedStep(p, m, p.Step)
	if r.deadline > 0 && r.Clock.Now()+need > r.deadline {
		*warnings = append(*warnings, fmt.Sprintf("no step held the bar, and the GPU window has no room left to run %d sessions again", m))
		return 0, false
	}
	r.reserve = 0
	reseed(r.Load, 2) // fresh plays again, as for the repeats
	return m, true
}

// drain stops the lanes and waits for the engine to be idle before a step
// that must not inherit the last one's backlog, and says how that went.
func (r *Runner) drain(ctx context.Context) PostFlight {
	r.Load.SetSessions(0)
	return r.awaitIdle(ctx, r.Clock.Now())
}

// rampBatches is how many batches of the ladder's first step a step of n
// sessions started from a drained engine brings its lanes back in before
// the last, each one warm-up long (0 without a ladder).
func rampBatches(p Plan, n int) int {
	if len(p.Ladder) == 0 {
		return 0
	}
	return (n - 1) / max(p.Ladder[0], 1)
}

// maxStepsDown bounds the steps stepDown runs below the lowest one.
const maxStepsDown = 2

// stepDown picks a step below the lowest one run when, after the climb,
// the repeats and the settle step, no step passed: a ladder whose first
// step sits on the crossing (the reference recipe 0 crosses at 10
// sessions, its first step) reads "not established" in about half its
// runs, though a step a little lower holds. The first step down is at
// three quarters of the lowest step, the next at half of the first step,
// so that a recipe just under its first step is bracketed closely and one
// far under it still shows where it holds. Like the settle step, it runs
// only when the GPU window has room for it at its minimum length with the
// ramp back from a drained engine, and after the engine drained; down is
// how many steps down ran before, first the first step run.
func (r *Runner) stepDown(ctx context.Context, steps []StepResult, first, down int, warnings *[]string) (int, bool) {
	if down >= maxStepsDown || ctx.Err() != nil || len(steps) == 0 {
		return 0, false
	}
	low, held := lowestUnheld(steps)
	if held {
		return 0, false // a step held: nothing to look for below
	}
	m := low * 3 / 4
	if down > 0 {
		m = min(m, first/2)
	}
	if m < 1 || m >= low {
		return 0, false
	}
	p := r.Plan
	need := rampedStep(p, m, p.Step)
	if r.deadline > 0 && r.Clock.Now()+need > r.deadline {
		*warnings = append(*warnings, fmt.Sprintf("no step held the bar, and the GPU window has no room left to run %d sessions, below the lowest step", m))
		return 0, false
	}
	if pf := r.drain(ctx); !pf.Idle {
		*warnings = append(*warnings, fmt.Sprintf("before %d sessions, below the lowest step: %s; it starts on a backlog", m, pf.Detail))
	}
	r.reserve, r.ramp = 0, true
	return m, true
}

// keepsRoomBelow says whether running a step of n sessions now (ramped back
// from a drained engine when ramp, as a repeat or a step down is) at its
// minimum length still leaves the GPU window room for the step below the
// lowest that stepDown runs when no step has held, at its longest. Once a step
// has held, before any has run, and without a window or a ladder to step
// down from, it does. While every step has missed or read too close, a
// capacity rests on a step that holds, not on a closer bracket: reference
// recipe 0 in adaptive mode read its first step, 10 sessions, too close,
// bisected 20, 15, 12 and 11 and repeated 11 and 12, and had no room left
// for 7, which holds (issue 21). Only the adaptive mode asks: a ladder's
// climb and repeats are the plan, which fits the window, and what runs
// after them runs only where room is left.
func (r *Runner) keepsRoomBelow(steps []StepResult, n int, ramp bool) bool {
	p := r.Plan
	if r.deadline <= 0 || len(p.Ladder) < 2 || len(steps) == len(p.Previous) {
		return true
	}
	low, held := lowestUnheld(steps)
	if held {
		return true
	}
	if low == 0 || n < low {
		low = n
	}
	m := low * 3 / 4
	if m < 1 {
		return true
	}
	this := p.Warmup + p.Step
	if ramp {
		this = rampedStep(p, n, p.Step)
	}
	// the step below at its longest: it runs to hold, and at fewer sessions
	// it makes fewer turns, so its error part needs the time to be decided
	// (reference 0 at 7 sessions: 0 errors in 114 turns of 10 minutes, a
	// Wilson bound of 3.3% against a 2% bar, with no room left to run on)
	below := rampedStep(p, m, max(p.MaxStep, p.Step))
	return r.Clock.Now()+this+below <= r.deadline
}

// rampedStep is how long a step of n sessions judged for judged takes from
// a drained engine: its lanes come back in batches of the ladder's first
// step, one warm-up each, as step does.
func rampedStep(p Plan, n int, judged time.Duration) time.Duration {
	return time.Duration(1+rampBatches(p, n))*p.Warmup + judged
}

// lowestUnheld is the fewest sessions of the judged steps (0: none), and
// whether any of them held the bar.
func lowestUnheld(steps []StepResult) (low int, held bool) {
	for _, pt := range Points(steps) {
		if pt.Judged.Verdict == verdict.Pass {
			return low, true
		}
		if low == 0 || pt.Sessions < low {
			low = pt.Sessions
		}
	}
	return low, false
}
