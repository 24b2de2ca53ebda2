// Package verdict holds the bar and judges a step against it from the
// server-reported windows of that step: each part gets a value with a 95%
// interval, a margin and a verdict of pass, fail, too close or no data.
package verdict

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
)

// Bar is the pass line, agreed before the first run.
type Bar struct {
	TTFTP90          float64 `json:"ttft_p90_s"`            // pass when P90 TTFT <= this
	InteractivityP90 float64 `json:"interactivity_p90_tps"` // pass when P90 interactivity >= this
	ErrorRate        float64 `json:"error_rate"`            // pass when error rate < this (a fraction)
}

// Verdict is the outcome of a part or a step.
type Verdict string

// Verdicts, from best to worst for a step: pass, too_close, no_data, fail.
// A step is as bad as its worst part: a confident fail on any part is a fail
// whatever else is missing; a missing measurement never passes, so no_data
// outranks too_close.
const (
	Pass     Verdict = "pass"
	TooClose Verdict = "too_close"
	NoData   Verdict = "no_data"
	Fail     Verdict = "fail"
)

// severity orders verdicts for a step; higher is worse.
func (v Verdict) severity() int {
	switch v {
	case Pass:
		return 0
	case TooClose:
		return 1
	case NoData:
		return 2
	case Fail:
		return 3
	}
	return 2 // an unknown verdict is not a pass
}

// Worse returns the worse of two verdicts (see the order above).
func Worse(a, b Verdict) Verdict {
	if b.severity() > a.severity() {
		return b
	}
	return a
}

// Part names.
const (
	PartTTFT          = "ttft"
	PartInteractivity = "interactivity"
	PartErrors        = "errors"
)

// LoadWindow is what the load generator planned and saw in one window,
// aligned with the signal windows by index.
type LoadWindow struct {
	Planned      int `json:"planned"`       // turns the lanes meant to send in the window (Sent + Unsent + NotReached)
	Sent         int `json:"sent"`          // turns that reached the server
	NotReached   int `json:"not_reached"`   // turns that never reached the server (connection refused, etc.)
	Unsent       int `json:"unsent"`        // turns a failed conversation never sent
	ClientErrors int `json:"client_errors"` // turns the client saw fail (status >= 400, timeout, abort): cross-checks only
}

// Part is the verdict on one part of the bar.
type Part struct {
	Name    string        `json:"name"` // "ttft", "interactivity", "errors"
	Verdict Verdict       `json:"verdict"`
	Value   stats.Summary `json:"value"`
	Bar     float64       `json:"bar"`
	Margin  float64       `json:"margin"`           // signed, from the center: positive = room left before the bar, in the part's unit
	Bucket  [2]float64    `json:"bucket,omitempty"` // edges of the histogram bucket holding the quantile (in the part's unit)
	Source  string        `json:"source"`           // the signal used, e.g. "tpot_seconds" or DerivedSource
	// Derived says how the value was derived when the server does not
	// report the part's quantity itself (interactivity from per-token
	// latency: signal.DerivedTPOT); empty when it was measured directly.
	Derived string   `json:"derived,omitempty"`
	Missing []string `json:"missing,omitempty"`
	// Spread says which sources of variance the interval carries (windows
	// in blocks, sessions); nil when it is the bucket or binomial one alone.
	Spread *Spread `json:"spread,omitempty"`
	// AtLimit is true when the part would have passed but the engine
	// preempted requests in the step (Step.Preemptions) or filled its KV
	// cache (Options.KVLimit): it reads too close.
	AtLimit bool `json:"at_limit,omitempty"`
	// CutShort is true when the kill switch ended a run of the step: the
	// value and interval are what the windows measured before it, and the
	// windows it did not measure would have read worse (it stopped because
	// the queue was running away), so the truth may lie past the interval
	// on the bad side. Bounds gives the interval with that side open.
	CutShort bool `json:"cut_short,omitempty"`
	// Limited is true on a latency part when the engine was at its limit in
	// the step (it preempted, or its KV cache filled; see atLimit), whatever
	// the part reads: the windows show the engine before another draw of
	// sessions tips it into a queue that runs away, and the truth may lie
	// past the interval on the bad side, as after a kill. Bounds opens it.
	Limited bool `json:"limited,omitempty"`
}

// Open says why the part's interval is open on its bad side: "cut short"
// (the kill switch ended a run of the step), "at the engine's limit"
// (Limited), or "" when it is closed.
func (p Part) Open() string {
	switch {
	case p.CutShort:
		return "cut short"
	case p.Limited:
		return "at the engine's limit"
	}
	return ""
}

// Bounds is the part's interval as it may be claimed: Value's bounds, with
// the bad side open when the run was cut short or the engine was at its
// limit (Open; TTFT and errors up to +Inf, interactivity down to 0).
func (p Part) Bounds() (lo, hi float64) {
	lo, hi = p.Value.Lo, p.Value.Hi
	if p.Open() == "" {
		return lo, hi
	}
	if p.Name == PartInteractivity {
		return 0, hi
	}
	return lo, math.Inf(1)
}

// DerivedSource is the interactivity part's source when its per-request
// time per output token is derived from per-token latency.
const DerivedSource = signal.ITL + " (derived per request)"

// MarshalJSON writes non-finite margins and bucket edges as "+Inf"/"-Inf".
func (p Part) MarshalJSON() ([]byte, error) {
	type plain Part
	return json.Marshal(struct {
		plain
		Bar    stats.Number    `json:"bar"`
		Margin stats.Number    `json:"margin"`
		Bucket [2]stats.Number `json:"bucket"`
	}{plain(p), stats.Number(p.Bar), stats.Number(p.Margin), [2]stats.Number{stats.Number(p.Bucket[0]), stats.Number(p.Bucket[1])}})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Part) UnmarshalJSON(b []byte) error {
	type plain Part
	var j struct {
		plain
		Bar    stats.Number    `json:"bar"`
		Margin stats.Number    `json:"margin"`
		Bucket [2]stats.Number `json:"bucket"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Part(j.plain)
	p.Bar, p.Margin = float64(j.Bar), float64(j.Margin)
	p.Bucket = [2]float64{float64(j.Bucket[0]), float64(j.Bucket[1])}
	return nil
}

// Step is the verdict on one step.
type Step struct {
	Verdict      Verdict  `json:"verdict"` // the worst part's verdict (order: fail, no_data, too_close, pass)
	Parts        []Part   `json:"parts"`
	Missing      []string `json:"missing,omitempty"` // every signal the bar wanted and did not get
	Warnings     []string `json:"warnings,omitempty"`
	SentFraction float64  `json:"sent_fraction"`
	// Preemptions is how many requests the engine preempted (vLLM) or
	// retracted (SGLang) for lack of KV cache over the judged windows, as
	// its counter reports; 0 when it reports none or has no such counter.
	Preemptions float64 `json:"preemptions,omitempty"`
}

// Part returns the part with the given name.
func (s Step) Part(name string) (Part, bool) {
	for _, p := range s.Parts {
		if p.Name == name {
			return p, true
		}
	}
	return Part{}, false
}

// Options say how to judge.
type Options struct {
	Resamples       int     `json:"resamples"`         // bootstrap resamples
	Seed            uint64  `json:"seed"`              // bootstrap seed, so a step re-judges the same
	Block           int     `json:"block"`             // 0 moving blocks of stats.BlockLength(windows); 1 single windows; >1 moving blocks of this many
	Confidence      float64 `json:"confidence"`        // of every interval
	MinSentFraction float64 `json:"min_sent_fraction"` // latency is no_data below this share of planned turns sent; 0 means 0.95
	// ClientErrors, when the server reports no HTTP status counters (SGLang
	// alone does not), counts errors as the client saw them instead of
	// reading no data; the part's source says so. Off by default.
	ClientErrors bool `json:"client_errors,omitempty"`
	// AllowPreemptions judges latency on the bar alone in a step whose
	// engine preempted requests; by default such a step's latency cannot
	// pass (see atLimit).
	AllowPreemptions bool `json:"allow_preemptions,omitempty"`
	// KVLimit is the share of KV cache in use at which the engine is at
	// its limit (sweep.kv_limit): a step whose KV cache use reached it in
	// a scrape of the judged windows ran at the engine's limit, as one that
	// preempted did, and its latency cannot pass either (see atLimit;
	// AllowPreemptions lifts both). 0 turns this test off.
	KVLimit float64 `json:"kv_limit,omitempty"`
}

// DefaultOptions are 2000 resamples of windows in moving blocks of
// stats.BlockLength at 95% confidence, and latency judged only when at
// least 95% of the planned turns went out.
func DefaultOptions() Options {
	return Options{Resamples: 2000, Seed: 1, Block: 0, Confidence: 0.95, MinSentFraction: 0.95}
}

func (o Options) bootstrap() stats.BootstrapOptions {
	return stats.BootstrapOptions{Resamples: o.Resamples, Seed: o.Seed, Block: o.Block, Confidence: o.Confidence}
}

// fewWindows is the count below which a bootstrap over windows says little.
const fewWindows = 5

// judgeStep is Judge and JudgeWith.
func judgeStep(bar Bar, windows []signal.Window, load []LoadWindow, reqs []Request, o Options) Step {
	if o.Confidence <= 0 || o.Confidence >= 1 {
		o.Confidence = 0.95
	}
	if o.MinSentFraction <= 0 {
		o.MinSentFraction = DefaultOptions().MinSentFraction
	}
	var st Step
	planned, sent := 0, 0
	for _, l := range load {
		planned += l.Planned
		sent += l.Sent
	}
	if planned > 0 {
		st.SentFraction = float64(sent) / float64(planned)
	}
	for i, w := range windows {
		for _, m := range w.Warnings {
			st.Warnings = append(st.Warnings, fmt.Sprintf("window %d [%v, %v): %s", i, w.Start, w.End, m))
		}
	}
	if len(load) != len(windows) {
		st.Warnings = append(st.Warnings, fmt.Sprintf("%d signal windows but %d load windows: the error rate pairs only the first %d", len(windows), len(load), min(len(load), len(windows))))
	}
	if n := len(windows); n > 0 && n < fewWindows {
		st.Warnings = append(st.Warnings, fmt.Sprintf("only %d windows: the bootstrap intervals understate the uncertainty", n))
	}
	lowLoad := st.SentFraction < o.MinSentFraction
	if lowLoad {
		st.Warnings = append(st.Warnings, fmt.Sprintf("only %.1f%% of the planned turns went out (%d of %d), below %.0f%%: latency is no data", 100*st.SentFraction, sent, planned, 100*o.MinSentFraction))
	}
	j := judge{windows: windows, load: load, reqs: reqs, o: o}
	st.Parts = []Part{j.ttft(bar.TTFTP90, lowLoad), j.interactivity(bar.InteractivityP90, lowLoad), j.errors(bar.ErrorRate)}
	// A stalled engine reports nothing: requests that never start or get a
	// token add no latency observation, so the windows before the stall
	// would pass on their own. A window in which requests wait or run and
	// none makes progress is a missing measurement, whether or not anything
	// is "running" (a full KV cache leaves them all waiting), and latency
	// cannot pass over it.
	if stalled := stalledWindows(windows); stalled > 0 {
		st.Warnings = append(st.Warnings, fmt.Sprintf("in %d of %d windows requests were waiting or running and none made progress (nothing completed, no first token, no token generated: a stall, e.g. a full KV cache): latency cannot pass", stalled, len(windows)))
		for i := range st.Parts[:2] {
			if st.Parts[i].Verdict != Fail {
				st.Parts[i].Verdict = NoData
			}
		}
	}
	st.atLimit(windows, o)
	st.Verdict = Pass
	for _, p := range st.Parts {
		st.Verdict = Worse(st.Verdict, p.Verdict)
		for _, m := range p.Missing {
			if !slices.Contains(st.Missing, m) {
				st.Missing = append(st.Missing, m)
			}
		}
	}
	return st
}

// atLimit sums the engine's preemptions over the judged windows and, unless
// the options allow them, turns latency parts that passed into too close.
// An engine that preempts has run out of KV cache: it recomputes, and a
// replay with other sessions, or the same one a little longer, can tip it
// into a queue that runs away (on the built-in simulator's default recipe
// every step at 12 sessions preempted or filled the cache, and the pooled
// truth there is 18 s against a 5.3 s bar, while two of 20 such steps read
// pass on their own windows). A pass is a claim about the recipe, not
// about the sessions one run drew, so it needs a step clear of that limit.
//
// A KV cache that filled (use at or above o.KVLimit in some scrape) is the
// same limit reached before the engine had to preempt: the next longer
// prompt preempts or queues. On the built-in simulator's heavy-only mix,
// every 8-session step whose truth (P90 TTFT 5.9 s against a 5.3 s bar,
// pooled over runs of which some tipped) is beyond the bar and that read
// pass had filled its cache to 99.7-99.8% without a preemption; the steps
// truly within the bar on the default mix peaked at 36-98%.
//
// Such a step's latency intervals are open on the bad side (Part.Limited),
// whatever they read: of the latency intervals that missed the pooled truth
// at the levels near the crossing, most were steps at this limit whose
// queue had not (yet) tipped.
func (st *Step) atLimit(windows []signal.Window, o Options) {
	peak := 0.0
	for _, w := range windows {
		if v, ok := w.Counter[signal.Preemptions]; ok && v > 0 {
			st.Preemptions += v
		}
		if g, ok := w.Gauge[signal.KVCacheUsage]; ok && g.N > 0 {
			peak = math.Max(peak, g.Max)
		}
	}
	full := o.KVLimit > 0 && peak >= o.KVLimit
	if !(st.Preemptions > 0 || full) || o.AllowPreemptions {
		return
	}
	demoted := false
	for i := range st.Parts {
		p := &st.Parts[i]
		if p.Name != PartTTFT && p.Name != PartInteractivity {
			continue
		}
		p.Limited = true
		if p.Verdict == Pass {
			p.Verdict, p.AtLimit, demoted = TooClose, true, true
		}
	}
	switch {
	case demoted && !(st.Preemptions > 0):
		st.Warnings = append(st.Warnings, fmt.Sprintf("the engine's KV cache reached %.1f%% in use (sweep.kv_limit: %.0f%%) without preempting: it is at its limit, where another draw of sessions makes it preempt and can tip it into a queue that runs away, so latency reads too close, not pass (bar.allow_preemptions: true judges it on the bar alone)", 100*peak, 100*o.KVLimit))
	case demoted:
		st.Warnings = append(st.Warnings, fmt.Sprintf("the engine preempted %g requests for lack of KV cache: it is at its limit, where another draw of sessions can tip it into a queue that runs away, so latency reads too close, not pass (bar.allow_preemptions: true judges it on the bar alone)", st.Preemptions))
	}
}

// stalledWindows counts windows in which requests were waiting or running
// (either gauge above zero in some scrape of the window) and none made
// progress: no request completed, none got its first token and no token was
// generated (counted, or observed as a per-token latency). Only the progress
// signals a window has are read; a window without any of them cannot tell a
// stall from quiet and is not counted (its missing histograms make latency
// no data by themselves).
func stalledWindows(windows []signal.Window) int {
	n := 0
	for _, w := range windows {
		if stalled(w) {
			n++
		}
	}
	return n
}

// stalled reports whether requests waited or ran in w and none progressed.
func stalled(w signal.Window) bool {
	present := false
	for _, name := range []string{signal.Running, signal.Waiting} {
		if g, ok := w.Gauge[name]; ok && g.N > 0 && g.Max > 0 {
			present = true
		}
	}
	if !present {
		return false
	}
	seen := false // some progress signal is there to read
	for _, name := range []string{signal.GenerationTokens, signal.RequestsOK} {
		if v, ok := w.Counter[name]; ok {
			seen = true
			if v > 0 {
				return false
			}
		}
	}
	// per-token latency (ITL) is observed as tokens go out, where an engine
	// (llm-d-inference-sim) counts generated tokens only when a request ends
	for _, name := range []string{signal.TTFT, signal.E2E, signal.ITL} {
		if h, ok := w.Hist[name]; ok && !h.Empty() {
			seen = true
			if h.Count > 0 {
				return false
			}
		}
	}
	return seen
}

type judge struct {
	windows []signal.Window
	load    []LoadWindow
	reqs    []Request
	o       Options
}

// histograms returns the named histogram of every window that has it, and how
// many windows lack it.
func (j judge) histograms(name string) (hs []stats.Histogram, absent int) {
	for _, w := range j.windows {
		h, ok := w.Hist[name]
		if !ok {
			absent++
			continue
		}
		hs = append(hs, h)
	}
	return hs, absent
}

// quantileResult is the pooled P90 of a histogram signal with its bootstrap
// interval widened to at least the bucket holding the center.
type quantileResult struct {
	v, lo, hi float64
	// loOpen is true when lo is the lower edge of a bucket the whole interval
	// lies at or above: bucket (a, b] holds values above a, so the quantile is
	// strictly greater than lo.
	loOpen       bool
	bucket       [2]float64
	absent, n    int
	observations float64
	warnings     []string
	spread       *Spread
}

// p90 measures a histogram signal over the step; ok is false when there is
// nothing to measure, and why says what. q is the client's figure of the
// same quantity, whose records say how much the sessions the run drew add.
func (j judge) p90(name string, q clientQuantity) (r quantileResult, ok bool, why string) {
	hs, absent := j.histograms(name)
	r.absent, r.n = absent, len(j.windows)
	if len(hs) == 0 {
		return r, false, fmt.Sprintf("%s is missing from every window", name)
	}
	pooled, err := stats.Pool(hs)
	if err != nil {
		return r, false, fmt.Sprintf("%s cannot be pooled: %v", name, err)
	}
	r.observations = pooled.Count
	v, blo, bhi, ok := pooled.Quantile(0.9)
	if !ok {
		return r, false, fmt.Sprintf("%s has no observations in the step", name)
	}
	r.v, r.bucket = v, [2]float64{blo, bhi}
	block := j.blockFor(stats.QuantileScores(hs, v, 0.9))
	lo, hi, ok, err := stats.BootstrapQuantile(hs, 0.9, j.boot(block))
	if ok && err == nil {
		var sp Spread
		lo, hi, sp, ok = j.spread(v, lo, hi, len(hs), block, j.widening(q, stats.WeightedQuantile(0.9), block), j.pressure(q), true)
		r.spread = &sp
	}
	if err != nil || !ok {
		// Too thin to resample: the interval is the bucket alone.
		lo, hi = v, v
		r.spread = nil
		r.warnings = append(r.warnings, fmt.Sprintf("%s: too few windows with observations to bootstrap; interval is the bucket only", name))
	}
	// a quantile interpolated from these buckets never passes the largest
	// finite bound (past it, the +Inf bucket reads as that bound), so
	// neither does its interval unless the quantile's bucket is +Inf's
	if top := lastFinite(pooled.Upper); hi > top {
		hi = top
	}
	r.lo, r.hi = math.Min(lo, blo), math.Max(hi, bhi)
	r.loOpen = lo >= blo
	if absent > 0 {
		r.warnings = append(r.warnings, fmt.Sprintf("%s is missing from %d of %d windows: judged on the rest, and it cannot pass", name, absent, r.n))
	}
	return r, true, ""
}

// capPartial keeps a fail but turns anything better into no_data when the
// signal was missing from some windows: a missing measurement never passes.
func capPartial(v Verdict, absent int) Verdict {
	if absent > 0 && v != Fail {
		return NoData
	}
	return v
}

func (j judge) ttft(bar float64, lowLoad bool) Part {
	p := Part{Name: PartTTFT, Bar: bar, Source: signal.TTFT, Verdict: NoData}
	p.Value.Confidence = j.o.Confidence
	r, ok, why := j.p90(signal.TTFT, clientTTFT)
	if !ok {
		p.Missing = []string{signal.TTFT}
		p.Value.Warnings = append(p.Value.Warnings, why)
		return p
	}
	p.Value.Center, p.Value.Lo, p.Value.Hi = r.v, r.lo, r.hi
	p.Value.Warnings = append(p.Value.Warnings, r.warnings...)
	p.Bucket = r.bucket
	p.Spread = r.spread
	p.Margin = bar - r.v
	switch {
	case r.hi <= bar:
		p.Verdict = Pass
	case r.lo > bar || (r.loOpen && r.lo >= bar):
		p.Verdict = Fail
	default:
		p.Verdict = TooClose
	}
	if r.absent > 0 {
		p.Missing = []string{signal.TTFT}
	}
	p.Verdict = capPartial(p.Verdict, r.absent)
	if lowLoad {
		p.Verdict = NoData
	}
	return p
}

func (j judge) interactivity(bar float64, lowLoad bool) Part {
	p := Part{Name: PartInteractivity, Bar: bar, Source: signal.TPOT, Verdict: NoData}
	p.Value.Confidence = j.o.Confidence
	r, ok, why := j.p90(signal.TPOT, clientTPOT)
	if !ok {
		// The same per-request quantity, derived: a per-token P90 would
		// leave out the pauses a stream spends waiting (SGLang's prefill
		// batches), which per-request time per output token counts.
		r2, ok2, why2 := j.derivedP90()
		if !ok2 {
			p.Missing = []string{signal.TPOT, signal.ITL}
			p.Value.Warnings = append(p.Value.Warnings, why, why2)
			return p
		}
		r = r2
		p.Source = DerivedSource
		p.Derived = signal.DerivedTPOT
		p.Value.Warnings = append(p.Value.Warnings, why+": per-request time per output token "+signal.DerivedTPOT)
	}
	inv := func(x float64) float64 { return 1 / x } // 1/0 = +Inf, 1/+Inf = 0
	p.Value.Center, p.Value.Lo, p.Value.Hi = inv(r.v), inv(r.hi), inv(r.lo)
	p.Value.Warnings = append(p.Value.Warnings, r.warnings...)
	p.Bucket = [2]float64{inv(r.bucket[1]), inv(r.bucket[0])}
	p.Spread = r.spread
	p.Margin = p.Value.Center - bar
	switch {
	case p.Value.Lo >= bar:
		p.Verdict = Pass
	case p.Value.Hi < bar || (r.loOpen && p.Value.Hi <= bar):
		// 1/lo is the top of the interval; when lo is an open bucket edge
		// the speed is strictly below it.
		p.Verdict = Fail
	default:
		p.Verdict = TooClose
	}
	if r.absent > 0 {
		p.Missing = []string{signal.TPOT}
		if p.Source != signal.TPOT {
			p.Missing = []string{signal.ITL}
		}
	}
	p.Verdict = capPartial(p.Verdict, r.absent)
	if lowLoad {
		p.Verdict = NoData
	}
	return p
}

// lastFinite is the largest finite bucket bound (+Inf when there is none).
func lastFinite(upper []float64) float64 {
	for i := len(upper) - 1; i >= 0; i-- {
		if !math.IsInf(upper[i], 1) {
			return upper[i]
		}
	}
	return math.Inf(1)
}
