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
	"sort"
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
	Ladder  []int
	Warmup  time.Duration
	Step    time.Duration
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

// Kill is the kill switch: limits past which a step is ended early. Zero
// values turn a limit off.
type Kill struct {
	QueuePerSession float64 // waiting requests per session, growing over three scrapes
	ErrorRate       float64 // errors per turn sent in the last window
	TTFTFactor      float64 // P90 TTFT of the last window past this many times the bar
}

// Runner runs one sweep.
type Runner struct {
	Plan   Plan
	Clock  *timescale.Clock
	Load   Load
	Source Source
	Book   *Book
	// OnSample and OnStep persist what the sweep learns as it goes; either may be nil.
	OnSample func(signal.Sample)
	OnStep   func(StepResult)
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

type inFlightSample struct {
	at     time.Duration
	n      int
	byTier map[string]int
}

// StepResult is one judged step.
type StepResult struct {
	Index        int          `json:"index"`
	Sessions     int          `json:"sessions"`
	Start        float64      `json:"start_s"`
	MeasureStart float64      `json:"measure_start_s"`
	End          float64      `json:"end_s"`
	Judged       verdict.Step `json:"judged"`
	Load         LoadSummary  `json:"load"`
	Tokens       Tokens       `json:"tokens"`
	Windows      int          `json:"windows"`
	Warmup       *Warmup      `json:"warmup,omitempty"`
	// RepeatOf is the index of the step this one repeats; its verdict pools
	// both runs' windows. -1 when it is no repeat.
	RepeatOf int `json:"repeat_of"`
	// Killed says why the kill switch ended the step early, if it did.
	Killed string `json:"killed,omitempty"`
	// KVCacheMean is the mean KV cache use over the judged time.
	KVCacheMean float64 `json:"kv_cache_mean"`

	// what the verdict was computed from, kept in memory to pool a repeat
	judgedWindows []signal.Window
	judgedLoads   []verdict.LoadWindow
}

// Warmup is how the lanes' priming went by the time a step's judged time began.
type Warmup struct {
	Primed   int     `json:"primed"`
	Pending  int     `json:"pending"`
	Failed   int     `json:"failed"`
	LongestS float64 `json:"longest_s"`
}

// ErrWarmupTooShort is returned when lanes were still priming when a step's
// judged time began: the warm-up would have eaten the step.
var ErrWarmupTooShort = errors.New("warm-up too short")

// LoadSummary is what the load generator sent and saw in a step's judged time.
type LoadSummary struct {
	Planned      int `json:"planned"`
	Sent         int `json:"sent"`
	NotReached   int `json:"not_reached"`
	Unsent       int `json:"unsent"`
	ClientErrors int `json:"client_errors"`
	// InFlight is the mean of requests in flight; per session it shows how much
	// parallel work each session really keeps open.
	InFlight           float64 `json:"in_flight_mean"`
	InFlightPerSession float64 `json:"in_flight_per_session"`
	// InFlightByTier is the mean of requests in flight of each tier's lanes.
	InFlightByTier map[string]float64 `json:"in_flight_by_tier,omitempty"`
	// ClientTTFTP90 is the client-side P90 TTFT, kept for cross-checks only.
	ClientTTFTP90 float64 `json:"client_ttft_p90_s,omitempty"`
	// PromptDrift is served/planned prompt tokens - 1 over successful turns.
	PromptDrift float64 `json:"prompt_drift"`
	// IdealHitRate is the share of prompt tokens an ideal prefix cache would
	// have held, from the traces' hash ids, over successful turns.
	IdealHitRate float64 `json:"ideal_hit_rate"`
}

// Tokens are the server's token counters over a step's judged time.
type Tokens struct {
	Prompt  float64 `json:"prompt"`
	Cached  float64 `json:"cached"`
	Output  float64 `json:"output"`
	Seconds float64 `json:"seconds"`
	PerHour float64 `json:"per_hour"`
}

// Result is a whole sweep.
type Result struct {
	Steps      []StepResult `json:"steps"`
	Capacity   Capacity     `json:"capacity"`
	PostFlight PostFlight   `json:"post_flight"`
	Warnings   []string     `json:"warnings,omitempty"`
	StopReason string       `json:"stop_reason"`
}

// PostFlight says whether the engine went back to idle after the load stopped.
type PostFlight struct {
	Idle     bool    `json:"idle"`
	WaitedS  float64 `json:"waited_s"`
	Running  float64 `json:"running"`
	Waiting  float64 `json:"waiting"`
	Detail   string  `json:"detail,omitempty"`
	Verified bool    `json:"verified"` // the gauges were present to check it
}

// Samples returns a copy of the samples scraped so far.
func (r *Runner) Samples() []signal.Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]signal.Sample(nil), r.samples...)
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
	sctx, stopScrape := context.WithCancel(ctx)
	scrapeDone := make(chan struct{})
	go func() { defer close(scrapeDone); r.scrapeLoop(sctx) }()
	defer func() { stopScrape(); <-scrapeDone }()

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
			return step, false
		}
		if repeatOf >= 0 {
			step = r.pool(step, res.Steps)
		}
		if r.Extra != nil {
			step.Judged = WithParts(step.Judged, r.Extra(step.Index)...)
		}
		res.Steps = append(res.Steps, step)
		if r.OnStep != nil {
			r.OnStep(step)
		}
		r.logf("step %d: %s", step.Index+1, describeStep(step))
		return step, true
	}
	seq := newSequence(p)
	for {
		n, more := seq.next()
		if !more {
			break
		}
		step, ok := run(n, -1)
		if !ok {
			break
		}
		why := missed(p, step)
		seq.judged(n, why != "")
		if why != "" {
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
		r.Load.SetSessions(0)
		if pf := r.awaitIdle(ctx, r.Clock.Now()); !pf.Idle {
			res.Warnings = append(res.Warnings, "before the repeats: "+pf.Detail+"; they start on a backlog")
		}
		// the steps either side of the crossing run again; each verdict then
		// rests on both runs
		for _, n := range []int{lo, hi} {
			first := lastAt(res.Steps, n)
			if _, ok := run(n, first); !ok {
				break
			}
		}
		res.StopReason += "; the steps either side were repeated"
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
	case step.Judged.Verdict == verdict.Fail || step.Judged.Verdict == verdict.NoData:
		return fmt.Sprintf("step %d (%d sessions) read %s", step.Index+1, n, step.Judged.Verdict)
	case step.Killed != "":
		return fmt.Sprintf("kill switch at %d sessions: %s", n, step.Killed)
	case p.KVFull > 0 && step.KVCacheMean >= p.KVFull:
		return fmt.Sprintf("the KV cache stayed full at %d sessions (%.0f%% on average)", n, 100*step.KVCacheMean)
	}
	return ""
}

// sequence picks the sessions of the next step. The ladder climbs its steps
// in order and stops at the first miss; the adaptive mode doubles from the
// first step until a miss, then bisects between the highest step that held
// and the lowest that missed until they are Resolution apart, so each step
// halves the capacity interval.
type sequence struct {
	p      Plan
	k      int // next ladder position
	lo, hi int // highest held and lowest missed sessions; 0 = none yet
	steps  int
}

func newSequence(p Plan) *sequence { return &sequence{p: p} }

func (q *sequence) next() (int, bool) {
	if !q.p.Adaptive {
		if q.k >= len(q.p.Ladder) || (q.hi > 0 && q.steps > 0) {
			return 0, false
		}
		q.k++
		return q.p.Ladder[q.k-1], true
	}
	if len(q.p.Ladder) == 0 {
		return 0, false
	}
	first, top := q.p.Ladder[0], q.p.Ladder[len(q.p.Ladder)-1]
	res := max(q.p.Resolution, 1)
	switch {
	case q.lo == 0 && q.hi == 0:
		return first, true
	case q.lo == 0: // the first step missed
		return 0, false
	case q.hi == 0: // still climbing
		if q.lo >= top {
			return 0, false
		}
		return min(2*q.lo, top), true
	case q.hi-q.lo <= res:
		return 0, false
	}
	return (q.lo + q.hi) / 2, true
}

func (q *sequence) judged(n int, miss bool) {
	q.steps++
	if miss {
		if q.hi == 0 || n < q.hi {
			q.hi = n
		}
		return
	}
	if n > q.lo && (q.hi == 0 || n < q.hi) {
		q.lo = n
	}
}

// bracket is the highest step that held and the lowest that missed.
func (q *sequence) bracket() (lo, hi int) { return q.lo, q.hi }

func (q *sequence) story() string {
	switch {
	case q.lo == 0 && q.hi > 0:
		return fmt.Sprintf("adaptive: the first step (%d sessions) missed", q.hi)
	case q.hi == 0:
		return fmt.Sprintf("adaptive: every step held, up to %d sessions", q.lo)
	}
	return fmt.Sprintf("adaptive: bracketed between %d (held) and %d (missed) sessions in %d steps", q.lo, q.hi, q.steps)
}

// Points are the steps capacity is computed from: for each number of
// sessions, its latest judgement (a repeat's pooled verdict replaces the
// first run's).
func Points(steps []StepResult) []Point {
	latest := map[int]int{}
	var order []int
	for k, s := range steps {
		if _, ok := latest[s.Sessions]; !ok {
			order = append(order, s.Sessions)
		}
		latest[s.Sessions] = k
	}
	out := make([]Point, 0, len(order))
	for _, n := range order {
		s := steps[latest[n]]
		out = append(out, Point{Sessions: n, Judged: s.Judged})
	}
	return out
}

// lastAt is the index of the latest step at n sessions, or -1.
func lastAt(steps []StepResult, n int) int {
	idx := -1
	for _, s := range steps {
		if s.Sessions == n {
			idx = s.Index
		}
	}
	return idx
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
	if repeatOf >= 0 && len(p.Ladder) > 0 {
		// a repeat starts from a drained engine: bring the lanes back in
		// batches of the ladder's first step, one warm-up each, as the climb
		// did, so their cold prompts do not all queue at once
		batch := max(p.Ladder[0], 1)
		for have := batch; have < n; have += batch {
			r.Load.SetSessions(have)
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
	killed := ""
	for t := measureStart + p.Scrape; t <= measureEnd; t += p.Scrape {
		if err := c.SleepUntil(ctx, t); err != nil {
			return StepResult{}, err
		}
		if killed = r.kill(n, measureStart, t); killed != "" {
			r.awaitSample(ctx, t)
			measureEnd = t
			r.logf("step %d: kill switch: %s", i+1, killed)
			break
		}
	}
	// the next step's warm-up starts now; records sent from here are its own
	r.Load.SetTag(load.Tag{Step: i + 1, Sessions: n, Phase: load.PhaseWarmup})
	if err := r.awaitSample(ctx, measureEnd); err != nil {
		return StepResult{}, err
	}
	step := StepResult{
		Index: i, Sessions: n, RepeatOf: repeatOf, Killed: killed, Warmup: warm,
		Start: start.Seconds(), MeasureStart: measureStart.Seconds(), End: measureEnd.Seconds(),
	}
	step.Load.InFlight, step.Load.InFlightByTier = r.meanInFlight(measureStart, measureEnd)
	return JudgeStep(p, step, r.Samples(), r.Book.Step(i, load.PhaseMeasure)), nil
}

// JudgeStep judges one step from the samples and the step's judged records,
// as the sweep does live and as `headroom judge` does from a run directory.
// step carries the step's index, sessions, times and in-flight figures.
func JudgeStep(p Plan, step StepResult, samples []signal.Sample, records []load.Record) StepResult {
	from := time.Duration(step.MeasureStart * float64(time.Second))
	to := time.Duration(step.End * float64(time.Second))
	windows := signal.Windows(samples, from, to, p.Window)
	loads, summary := loadWindows(records, windows)
	summary.InFlight, summary.InFlightByTier = step.Load.InFlight, step.Load.InFlightByTier
	summary.InFlightPerSession = summary.InFlight / float64(step.Sessions)
	step.Judged = verdict.Judge(p.Bar, windows, loads, p.Options)
	step.Judged.Warnings = append(step.Judged.Warnings, crossChecks(windows, summary)...)
	if step.Killed != "" {
		step.Judged.Warnings = append(step.Judged.Warnings, "the kill switch ended this step early: "+step.Killed)
	}
	step.Load, step.Tokens, step.Windows = summary, tokensOf(windows), len(windows)
	step.KVCacheMean = gaugeMean(windows, signal.KVCacheUsage)
	step.judgedWindows, step.judgedLoads = windows, loads
	return step
}

// pool judges a repeated step on its own windows and those of the run it
// repeats, together.
func (r *Runner) pool(step StepResult, before []StepResult) StepResult {
	for _, b := range before {
		if b.Index == step.RepeatOf {
			return Pool(r.Plan, b, step)
		}
	}
	return step
}

// WithParts adds bar parts to a judged step; the step's verdict becomes the
// worst of all its parts.
func WithParts(st verdict.Step, parts ...verdict.Part) verdict.Step {
	for _, p := range parts {
		st.Parts = append(st.Parts, p)
		st.Verdict = verdict.Worse(st.Verdict, p.Verdict)
		st.Missing = append(st.Missing, p.Missing...)
	}
	return st
}

// Pool judges a repeat on both runs' windows together. Both must come from
// JudgeStep in this process (they carry the windows they were judged on).
func Pool(p Plan, first, again StepResult) StepResult {
	if first.judgedWindows == nil {
		return again
	}
	ws := append(append([]signal.Window(nil), first.judgedWindows...), again.judgedWindows...)
	ls := append(append([]verdict.LoadWindow(nil), first.judgedLoads...), again.judgedLoads...)
	again.Judged = verdict.Judge(p.Bar, ws, ls, p.Options)
	again.Judged.Warnings = append(again.Judged.Warnings, fmt.Sprintf("judged on this run and step %d's together (%d windows)", first.Index+1, len(ws)))
	again.Windows = len(ws)
	return again
}

// kill checks the kill switch on the latest window of the judged time; it
// waits for one whole window, so warm-up never trips it.
func (r *Runner) kill(n int, from, now time.Duration) string {
	k := r.Plan.Kill
	r.mu.Lock()
	var samples []signal.Sample
	for _, s := range r.samples {
		if s.At >= from {
			samples = append(samples, s)
		}
	}
	r.mu.Unlock()
	if len(samples) < 2 || now-from < r.Plan.Window {
		return ""
	}
	if k.QueuePerSession > 0 && len(samples) >= 3 {
		a, b, c := samples[len(samples)-3], samples[len(samples)-2], samples[len(samples)-1]
		w := c.Gauge[signal.Waiting]
		if w > k.QueuePerSession*float64(n) && w > b.Gauge[signal.Waiting] && b.Gauge[signal.Waiting] > a.Gauge[signal.Waiting] {
			return fmt.Sprintf("%.0f requests waiting and growing (limit %.0f for %d sessions)", w, k.QueuePerSession*float64(n), n)
		}
	}
	ws := signal.Windows(samples, now-r.Plan.Window, now, r.Plan.Window)
	if len(ws) == 0 {
		return ""
	}
	w := ws[len(ws)-1]
	if k.TTFTFactor > 0 {
		if h, ok := w.Hist[signal.TTFT]; ok {
			if v, _, _, ok := h.Quantile(0.9); ok && v > k.TTFTFactor*r.Plan.Bar.TTFTP90 {
				return fmt.Sprintf("P90 TTFT of the last window %.1fs is past %g times the bar", v, k.TTFTFactor)
			}
		}
	}
	if k.ErrorRate > 0 {
		errs := w.Counter[signal.HTTP4xx] + w.Counter[signal.HTTP5xx] + w.Counter[signal.RequestsAborted]
		done := errs + w.Counter[signal.RequestsOK]
		if done >= 10 && errs/done > k.ErrorRate {
			return fmt.Sprintf("%.0f%% of the last window's requests failed (limit %.0f%%)", 100*errs/done, 100*k.ErrorRate)
		}
	}
	return ""
}

func gaugeMean(ws []signal.Window, name string) float64 {
	sum, n := 0.0, 0
	for _, w := range ws {
		if g, ok := w.Gauge[name]; ok && g.N > 0 {
			sum += g.Mean * float64(g.N)
			n += g.N
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
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
	deadline := time.Now().Add(r.Clock.Real(2*r.Plan.Scrape) + 2*time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		n := len(r.samples)
		ok := n > 0 && r.samples[n-1].At >= t
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	r.mu.Lock()
	r.warnings = appendOnce(r.warnings, fmt.Sprintf("no metrics sample landed at the end of a step (%s): the last window is judged on what there is", fmtDur(t)))
	r.mu.Unlock()
	return nil
}

// loadWindows counts, per judged window, the turns the lanes planned and what
// became of them, from the records of a step's judged time.
func loadWindows(records []load.Record, windows []signal.Window) ([]verdict.LoadWindow, LoadSummary) {
	out := make([]verdict.LoadWindow, len(windows))
	var sum LoadSummary
	var ttfts []float64
	var planned, served, ideal float64
	for _, rec := range records {
		k := windowOf(windows, rec.Send)
		if k < 0 {
			continue
		}
		w := &out[k]
		w.Planned++
		switch rec.Error {
		case load.ErrUnsent:
			w.Unsent++
		case load.ErrConnect:
			w.NotReached++
		default:
			w.Sent++
		}
		if rec.Failed() && rec.Error != load.ErrUnsent {
			w.ClientErrors++
		}
		if !rec.Failed() && !rec.Pending {
			if t := rec.TTFT(); t > 0 {
				ttfts = append(ttfts, t)
			}
			planned += float64(rec.PlannedPromptTokens)
			served += float64(rec.ServedPromptTokens)
			ideal += float64(rec.IdealCachedTokens)
		}
	}
	for _, w := range out {
		sum.Planned += w.Planned
		sum.Sent += w.Sent
		sum.NotReached += w.NotReached
		sum.Unsent += w.Unsent
		sum.ClientErrors += w.ClientErrors
	}
	sum.ClientTTFTP90 = quantile(ttfts, 0.9)
	if planned > 0 {
		sum.PromptDrift = served/planned - 1
		sum.IdealHitRate = ideal / planned
	}
	return out, sum
}

func windowOf(ws []signal.Window, t float64) int {
	for k, w := range ws {
		if t >= w.Start.Seconds() && t < w.End.Seconds() {
			return k
		}
	}
	return -1
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

// Tolerances of the cross-checks between what the client saw and what the
// server reported. Twyman's law: a figure that looks interesting is usually
// wrong, so each disagreement past these is a warning in the report.
const (
	requestTolerance  = 0.10 // share of requests, beyond the requests in flight at the window edges
	driftTolerance    = 0.05 // served vs planned prompt tokens
	hitRateTolerance  = 0.10 // server prefix-cache hit rate vs the traces' ideal, in points
	minCrossCheckTurn = 10   // fewer turns than this are too few to cross-check
)

// crossChecks compares the load generator's view of a step with the server's.
func crossChecks(ws []signal.Window, l LoadSummary) []string {
	if l.Sent < minCrossCheckTurn {
		return nil
	}
	var out []string
	var http, finished, hits, queries float64
	haveHTTP := false
	for _, w := range ws {
		if _, ok := w.Counter[signal.HTTP2xx]; ok {
			haveHTTP = true
			http += w.Counter[signal.HTTP2xx] + w.Counter[signal.HTTP4xx] + w.Counter[signal.HTTP5xx]
		}
		finished += w.Counter[signal.RequestsOK] + w.Counter[signal.RequestsAborted]
		hits += w.Counter[signal.PrefixCacheHits]
		queries += w.Counter[signal.PrefixCacheQueries]
	}
	server, what := finished, "requests the engine finished"
	if haveHTTP {
		server, what = http, "HTTP responses the server counted"
	}
	slack := requestTolerance*float64(l.Sent) + 2*l.InFlight + 2
	if math.Abs(server-float64(l.Sent)) > slack {
		out = append(out, fmt.Sprintf("cross-check: %s (%.0f) differ from requests sent (%d) by more than %.0f: are all copies' metrics scraped?", what, server, l.Sent, slack))
	}
	if math.Abs(l.PromptDrift) > driftTolerance {
		out = append(out, fmt.Sprintf("cross-check: served prompt tokens differ from planned by %+.1f%%: token calibration is off, so prompts are not the traces' length", 100*l.PromptDrift))
	}
	if queries > 0 && l.IdealHitRate > 0 {
		if got := hits / queries; math.Abs(got-l.IdealHitRate) > hitRateTolerance {
			out = append(out, fmt.Sprintf("cross-check: the server's prefix-cache hit rate (%.0f%%) differs from the traces' ideal (%.0f%%) by more than %.0f points: cache evictions, a router that splits conversations, or prompts that do not share prefixes", 100*got, 100*l.IdealHitRate, 100*hitRateTolerance))
		}
	}
	return out
}

func tokensOf(ws []signal.Window) Tokens {
	var t Tokens
	for _, w := range ws {
		t.Prompt += w.Counter[signal.PromptTokens]
		t.Cached += w.Counter[signal.PrefixCacheHits]
		t.Output += w.Counter[signal.GenerationTokens]
		t.Seconds += (w.End - w.Start).Seconds()
	}
	if t.Seconds > 0 {
		t.PerHour = (t.Prompt + t.Output) / t.Seconds * 3600
	}
	return t
}

// awaitIdle polls the server until the engine has nothing running or
// waiting, at most until the drain time has passed since start. It stops
// early when the server has no running/waiting gauges, since idleness cannot
// be checked then.
func (r *Runner) awaitIdle(ctx context.Context, start time.Duration) PostFlight {
	c := r.Clock
	var pf PostFlight
	for {
		s, err := r.Source.Scrape(ctx, c.Now())
		if err == nil {
			running, okR := s.Gauge[signal.Running]
			waiting, okW := s.Gauge[signal.Waiting]
			pf.Running, pf.Waiting, pf.Verified = running, waiting, okR && okW
			if pf.Verified && running == 0 && waiting == 0 {
				pf.Idle = true
				break
			}
			if !pf.Verified {
				pf.Detail = "the server reports no running/waiting gauges, so idleness could not be checked"
				break
			}
		}
		if c.Now()-start > r.Plan.Drain || ctx.Err() != nil {
			pf.Detail = fmt.Sprintf("the engine was not idle after %s: %g running, %g waiting", fmtDur(r.Plan.Drain), pf.Running, pf.Waiting)
			if err != nil {
				pf.Detail = "metrics unreachable after the load stopped: " + err.Error()
			}
			break
		}
		time.Sleep(c.Real(r.Plan.Scrape) / 5)
	}
	pf.WaitedS = (c.Now() - start).Seconds()
	return pf
}

// postFlight stops the load and waits until the engine has nothing running
// or waiting: a run is not over until the engine is back where it started.
func (r *Runner) postFlight(ctx context.Context) PostFlight {
	c := r.Clock
	r.Load.SetTag(load.Tag{Step: len(r.Plan.Ladder), Phase: load.PhaseDrain})
	start := c.Now()
	// Requests still in flight when four fifths of the drain have passed are
	// cancelled; the last fifth is for those aborts to reach the engine,
	// which through a gateway takes a moment.
	grace := c.Real(r.Plan.Drain * 4 / 5)
	if ctx.Err() != nil {
		grace = 0 // interrupted: cancel what is in flight now
	}
	r.Load.Stop(grace)
	// a fresh context: post-flight runs even when the sweep was interrupted
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.Real(r.Plan.Drain)+time.Second)
	defer cancel()
	pf := r.awaitIdle(pctx, start)
	if pf.Idle {
		r.logf("post-flight: engine idle after %.0fs", pf.WaitedS)
	} else {
		r.logf("post-flight: %s", pf.Detail)
	}
	return pf
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

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	idx := q * float64(len(s)-1)
	lo := int(math.Floor(idx))
	hi := int(math.Ceil(idx))
	return s[lo] + (s[hi]-s[lo])*(idx-float64(lo))
}
