// Package canary runs a canary on live traffic: a router in front of two
// recipes (today's, the baseline, and the candidate) sends a share of whole
// sessions to the candidate, raised in steps; both sides are judged window
// by window on the same bar from their own engines' metrics, with the
// statistics of a recipe run (package verdict), and the candidate is
// compared with the baseline on the same windows. A clear miss (the kill
// switch's rule) sends the share back to 0 at once and fails the canary;
// no data or too close holds the share; a candidate that holds with
// confidence for the hold time at the last share is ready. See
// docs/canary.md.
package canary

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// Plan is how a canary runs and is judged.
type Plan struct {
	// Shares are the candidate's share of new sessions at each step, rising
	// (0.01, 0.05, 0.2).
	Shares []float64
	// Hold is the least time at a share before the candidate may move on:
	// the windows since the step began must pass with confidence by then.
	// At the last share it is the time the candidate must hold to be ready.
	Hold time.Duration
	// MaxHold ends the canary undecided when a share has held this long
	// without deciding (no data or too close); 0 never does.
	MaxHold time.Duration
	// Window is the width of a judged window; Scrape how often both sides'
	// metrics are read (Window a whole multiple of it).
	Window, Scrape time.Duration
	Bar            verdict.Bar
	Options        verdict.Options
	Kill           Kill
	NoWorse        NoWorse
}

// Validate says what is wrong with a plan.
func (p Plan) Validate() error {
	var errs []error
	if len(p.Shares) == 0 {
		errs = append(errs, errors.New("shares: give the candidate's share at each step, such as [0.01, 0.05, 0.2]"))
	}
	for i, s := range p.Shares {
		if !(s > 0 && s <= 1) {
			errs = append(errs, fmt.Errorf("shares[%d]: %g is not a share in (0, 1]", i, s))
		}
		if i > 0 && s <= p.Shares[i-1] {
			errs = append(errs, fmt.Errorf("shares[%d]: %g must be above the step before (%g)", i, s, p.Shares[i-1]))
		}
	}
	if p.Window <= 0 || p.Scrape <= 0 || p.Window%p.Scrape != 0 {
		errs = append(errs, fmt.Errorf("window %v must be a whole multiple of scrape %v, both > 0", p.Window, p.Scrape))
	}
	if p.Hold < 3*p.Window {
		errs = append(errs, fmt.Errorf("hold %v must hold at least 3 windows of %v, so intervals can be bootstrapped", p.Hold, p.Window))
	}
	if p.MaxHold != 0 && p.MaxHold < p.Hold {
		errs = append(errs, fmt.Errorf("max hold %v must be 0 (none) or at least the hold %v", p.MaxHold, p.Hold))
	}
	return errors.Join(errs...)
}

// Outcomes of a canary.
const (
	Ready     = "ready"     // held with confidence at the last share for the hold time
	Failed    = "failed"    // a clear miss: the share went back to 0
	Undecided = "undecided" // a share held MaxHold without deciding; the share is kept
	Stopped   = "stopped"   // the context ended first; the share is kept
)

// Side is one side's judgement at a tick.
type Side struct {
	Verdict  verdict.Verdict `json:"verdict"`
	Step     verdict.Step    `json:"step"`
	Requests int             `json:"requests"` // chat requests routed to it since the share step began
}

// Tick is one judged window's end: both sides judged on the windows of the
// share step so far, and what the controller decided.
type Tick struct {
	At        float64  `json:"at_s"` // modelled seconds since the canary began
	Step      int      `json:"step"` // index into Plan.Shares
	Share     float64  `json:"share"`
	Windows   int      `json:"windows"`
	Baseline  Side     `json:"baseline"`
	Candidate Side     `json:"candidate"`
	NoWorse   Compared `json:"no_worse"`
	Miss      string   `json:"miss,omitempty"` // the kill switch's rule tripped on the candidate's last window
	Decision  string   `json:"decision"`       // hold, raise, ready, rollback, undecided
	Why       string   `json:"why"`
	Router    Snapshot `json:"router"`
}

// StepRecord is one share step, as it went.
type StepRecord struct {
	Share   float64 `json:"share"`
	StartS  float64 `json:"start_s"`
	EndS    float64 `json:"end_s"`
	Outcome string  `json:"outcome"` // raise, ready, rollback, undecided, stopped
}

// Result is a finished canary.
type Result struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason"`
	Split   string `json:"split"` // what split the sessions
	// ClientView is true when the canary's own router carried the
	// requests, so the report holds what it saw of them.
	ClientView bool         `json:"client_view"`
	Steps      []StepRecord `json:"steps"`
	Ticks      []Tick       `json:"ticks"`
	// Final is the router's last state; with a gateway's split only its
	// share (the canary saw no request).
	Final Snapshot `json:"final"`
	// Weights are the changes a gateway's split made to its weights, in
	// order.
	Weights []Write `json:"weights,omitempty"`
	// Notes say what the report lacks and why (a gateway's split has no
	// client view).
	Notes []string `json:"notes,omitempty"`
}

// Split sends the candidate its share of new sessions: the canary's own
// Router, or a gateway's weights (HTTPRouteSplit).
type Split interface {
	// SetShare gives the candidate share of the new sessions from now on;
	// sessions already begun stay where they are. The first call begins
	// the split and may refuse it.
	SetShare(ctx context.Context, share float64) error
	// Rollback sends every new session to the baseline at once.
	Rollback(ctx context.Context) error
	// Finish leaves the split as the outcome wants, once the canary is
	// decided (or stopped).
	Finish(ctx context.Context, outcome string) error
	String() string
}

// routerSplit is the canary's own Router as a Split: after a rollback it
// keeps routing at share 0, and after any outcome it keeps the share.
type routerSplit struct{ rt *Router }

func (s routerSplit) SetShare(_ context.Context, share float64) error {
	s.rt.SetShare(share)
	return nil
}
func (s routerSplit) Rollback(context.Context) error       { s.rt.Rollback(); return nil }
func (s routerSplit) Finish(context.Context, string) error { return nil }
func (s routerSplit) String() string                       { return "the canary's own router" }

// Scraper reads one side's engines (signal.Scraper).
type Scraper interface {
	Scrape(ctx context.Context, at time.Duration) (signal.Sample, error)
}

// Controller steps the share and judges both sides.
type Controller struct {
	Plan  Plan
	Clock *timescale.Clock
	// Router is the canary's own proxy: it splits the sessions unless
	// Split is set, and what it saw of each request (its session, first
	// byte, status) is carried into the judgement. Nil when a gateway
	// splits: the canary then sees no request.
	Router *Router
	// Split, when set, gives the candidate its share instead of Router (a
	// gateway's weights: HTTPRouteSplit).
	Split    Split
	Scrapers [2]Scraper // Baseline, Candidate
	// OnTick, when set, sees every tick as it is decided (progress lines; a
	// test's fault injection). It runs on the controller's goroutine.
	OnTick func(Tick)
	// Log receives scrape errors; nil discards them.
	Log func(format string, args ...any)

	share float64 // the candidate's share now, for a gateway's split
}

// Run runs the canary until it is decided or ctx ends. On a virtual clock
// it must run on a goroutine of the clock.
func (c *Controller) Run(ctx context.Context) (Result, error) {
	p := c.Plan
	if err := p.Validate(); err != nil {
		return Result{}, fmt.Errorf("canary: %w", err)
	}
	logf := c.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	split := c.Split
	if split == nil {
		if c.Router == nil {
			return Result{}, errors.New("canary: a controller needs a router or a split")
		}
		split = routerSplit{c.Router}
	}
	origin := c.Clock.Now()
	rel := func(t time.Duration) float64 { return (t - origin).Seconds() }
	res := Result{Split: split.String(), ClientView: c.Router != nil}
	if c.Router == nil {
		res.Notes = append(res.Notes, "The split is "+split.String()+": the canary saw no request, so the client's view is absent: no sessions, first bytes or statuses carried into the intervals (they carry the windows only), no request or session counts, each side's turns are its server's finished requests (requests the gateway could not deliver are not counted), and the kill switch's queue rule (per live session) is not read.")
	}
	var samples [2][]signal.Sample
	scrape := func(at time.Duration) {
		for side, s := range c.Scrapers {
			smp, err := s.Scrape(ctx, at)
			if err != nil {
				logf("canary: %s metrics at %.0fs: %v", SideName(side), rel(at), err)
				continue
			}
			samples[side] = append(samples[side], smp)
		}
	}
	step := 0
	stepStart := c.Clock.Now()
	if err := split.SetShare(ctx, p.Shares[0]); err != nil {
		return Result{}, fmt.Errorf("canary: %w", err)
	}
	c.share = p.Shares[0]
	res.Steps = append(res.Steps, StepRecord{Share: p.Shares[0], StartS: rel(stepStart)})
	endStep := func(outcome string, at time.Duration) {
		s := &res.Steps[len(res.Steps)-1]
		s.EndS, s.Outcome = rel(at), outcome
	}
	// done ends the canary: the split is left as the outcome wants, even
	// when ctx has ended
	done := func(outcome, why string) (Result, error) {
		res.Outcome, res.Reason = outcome, why
		if err := split.Finish(context.WithoutCancel(ctx), outcome); err != nil {
			logf("canary: %v", err)
			res.Reason += "; and the split was not put back: " + err.Error()
		}
		res.Final = c.snapshot()
		if w, ok := split.(interface{ Writes() []Write }); ok {
			res.Weights = w.Writes()
		}
		return res, nil
	}
	scrape(stepStart)
	next := stepStart
	begun := false
	for {
		next += p.Scrape
		if err := c.Clock.SleepUntil(ctx, next); err != nil {
			endStep(Stopped, c.Clock.Now())
			return done(Stopped, "stopped before the canary was decided: "+err.Error())
		}
		scrape(next)
		if step == 0 && !begun {
			// A candidate that has answered nothing yet exposes no request
			// counters (they appear with the first answer), and a window
			// whose edge lacks them reads no data: the first share's
			// judged time begins at the first scrape after its first
			// answer ended.
			if !c.answered(samples[Candidate]) {
				stepStart = next
				res.Steps[0].StartS = rel(next)
				if p.MaxHold > 0 && next-origin >= p.MaxHold {
					why := fmt.Sprintf("the candidate answered no request in %v at %g: the share is kept", next-origin, p.Shares[0])
					endStep(Undecided, next)
					return done(Undecided, why)
				}
				continue
			}
			begun = true
			stepStart = next
			res.Steps[0].StartS = rel(next)
			continue
		}
		// the kill switch's rule is read at every scrape on the last
		// window's worth of it, as a recipe run's is: a clear miss rolls
		// back at once, not at the window's end
		miss := ""
		if next-stepStart >= p.Window {
			miss = c.miss(samples[Candidate], stepStart, next)
		}
		if miss == "" && (next-stepStart)%p.Window != 0 {
			continue
		}
		t := c.judge(step, stepStart, next, samples)
		t.Miss = miss
		t.At = rel(next)
		held := next - stepStart
		switch {
		case t.Miss != "" || t.Candidate.Verdict == verdict.Fail || t.NoWorse.Verdict == verdict.Fail:
			rollErr := split.Rollback(ctx)
			c.share = 0
			t.Decision = "rollback"
			switch {
			case t.Miss != "":
				t.Why = "clear miss on the candidate (the kill switch's rule): " + t.Miss
			case t.Candidate.Verdict == verdict.Fail:
				t.Why = "the candidate fails the bar with confidence: " + failedParts(t.Candidate.Step)
			default:
				t.Why = "the candidate is worse than today with confidence: " + failedComparisons(t.NoWorse)
			}
			res.Outcome, res.Reason = Failed, t.Why+"; its share went back to 0"
			if rollErr != nil {
				logf("canary: rollback: %v", rollErr)
				res.Reason += " (" + rollErr.Error() + ")"
			}
		case held >= p.Hold && t.Candidate.Verdict == verdict.Pass && t.NoWorse.Verdict == verdict.Pass:
			if step == len(p.Shares)-1 {
				t.Decision, t.Why = Ready, fmt.Sprintf("held the bar and no worse than today with confidence for %v at the last share (%g)", held, p.Shares[step])
				res.Outcome, res.Reason = Ready, t.Why
				break
			}
			t.Decision, t.Why = "raise", fmt.Sprintf("held with confidence for %v at %g: raised to %g", held, p.Shares[step], p.Shares[step+1])
		case p.MaxHold > 0 && held >= p.MaxHold:
			t.Decision, t.Why = Undecided, fmt.Sprintf("held %v at %g without deciding (candidate %s, no worse than today %s): the share is kept", held, p.Shares[step], t.Candidate.Verdict, t.NoWorse.Verdict)
			res.Outcome, res.Reason = Undecided, t.Why
		default:
			t.Decision, t.Why = "hold", holdWhy(t, held, p.Hold)
		}
		t.Router = c.snapshot()
		res.Ticks = append(res.Ticks, t)
		if c.OnTick != nil {
			c.OnTick(t)
		}
		if res.Outcome != "" {
			endStep(t.Decision, next)
			return done(res.Outcome, res.Reason)
		}
		if t.Decision == "raise" {
			if err := split.SetShare(ctx, p.Shares[step+1]); err != nil {
				// the share stays where it was: the canary stops rather
				// than fight whoever holds the split now
				endStep(Stopped, next)
				logf("canary: raising to %g: %v", p.Shares[step+1], err)
				return done(Stopped, fmt.Sprintf("the candidate was ready to be raised to %g, but the split refused: %v", p.Shares[step+1], err))
			}
			endStep("raise", next)
			step++
			stepStart = next
			c.share = p.Shares[step]
			// the new share is judged from here: what came before is
			// read no more (its last sample is the next windows' edge)
			if c.Router != nil {
				c.Router.Forget(next)
			}
			for side := range samples {
				samples[side] = since(samples[side], next)
			}
			res.Steps = append(res.Steps, StepRecord{Share: p.Shares[step], StartS: rel(next)})
		}
	}
}

// judge judges both sides on the windows of the share step so far.
func (c *Controller) judge(step int, from, to time.Duration, samples [2][]signal.Sample) Tick {
	p := c.Plan
	t := Tick{Step: step, Share: p.Shares[step]}
	var js [2]judged
	for side := range js {
		var obs []Observation
		if c.Router != nil {
			obs = c.Router.Observations(side, from)
		}
		js[side] = judgeSide(p.Bar, p.Options, p.Window, samples[side], obs, c.Router != nil, from, to)
		s := Side{Verdict: js[side].step.Verdict, Step: js[side].step, Requests: len(obs)}
		if side == Baseline {
			t.Baseline = s
		} else {
			t.Candidate = s
		}
	}
	t.Windows = len(js[Candidate].windows)
	t.NoWorse = compare(p.NoWorse, p.Options, js[Baseline], js[Candidate])
	return t
}

// miss reads the kill switch's rule on the candidate's samples of the share
// step (from on) and its last window, [now-Window, now].
func (c *Controller) miss(samples []signal.Sample, from, now time.Duration) string {
	var recent []signal.Sample
	for _, s := range samples {
		if s.At >= from {
			recent = append(recent, s)
		}
	}
	ws := signal.Windows(recent, now-c.Plan.Window, now, c.Plan.Window)
	if len(ws) == 0 {
		return ""
	}
	return clearMiss(c.Plan.Kill, c.Plan.Bar, recent, ws[len(ws)-1], c.snapshot().Live[Candidate])
}

// snapshot is the router's state, or only the share when a gateway splits
// (the canary sees no request).
func (c *Controller) snapshot() Snapshot {
	if c.Router == nil {
		return Snapshot{Share: c.share}
	}
	return c.Router.Snapshot()
}

// answered says whether the candidate has answered a request since the
// canary began: the router's count, or with a gateway's split its own
// server's finished requests rising past the first sample's.
func (c *Controller) answered(samples []signal.Sample) bool {
	if c.Router != nil {
		return c.Router.Snapshot().Counts[Candidate].Finished > 0
	}
	if len(samples) == 0 {
		return false
	}
	first, last := finishedOf(samples[0]), finishedOf(samples[len(samples)-1])
	return last > first
}

// since keeps the samples taken at or after t, in a fresh slice.
func since(samples []signal.Sample, t time.Duration) []signal.Sample {
	for i, s := range samples {
		if s.At >= t {
			return append([]signal.Sample(nil), samples[i:]...)
		}
	}
	return nil
}

func holdWhy(t Tick, held, hold time.Duration) string {
	if held < hold {
		return fmt.Sprintf("%v of the %v hold so far (candidate %s, no worse than today %s)", held, hold, t.Candidate.Verdict, t.NoWorse.Verdict)
	}
	return fmt.Sprintf("the candidate reads %s and no worse than today %s: the share holds", t.Candidate.Verdict, t.NoWorse.Verdict)
}

func failedParts(st verdict.Step) string {
	out := ""
	for _, p := range st.Parts {
		if p.Verdict == verdict.Fail {
			if out != "" {
				out += ", "
			}
			out += fmt.Sprintf("%s %s against a bar of %g", p.Name, p.Value, p.Bar)
		}
	}
	return out
}

func failedComparisons(c Compared) string {
	out := ""
	for _, p := range c.Parts {
		if p.Verdict == verdict.Fail {
			if out != "" {
				out += ", "
			}
			out += fmt.Sprintf("%s %s past %g (%s)", p.Name, p.Value, p.Limit, p.Why)
		}
	}
	return out
}
