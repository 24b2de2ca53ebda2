package sweep

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// JudgeStep judges one step from the samples and the step's judged records,
// as the sweep does live and as `headroom judge` does from a run directory.
// step carries the step's index, sessions, times and in-flight figures.
func JudgeStep(p Plan, step StepResult, samples []signal.Sample, records []load.Record) StepResult {
	from := time.Duration(step.MeasureStart * float64(time.Second))
	to := time.Duration(step.End * float64(time.Second))
	windows := signal.Windows(samples, from, to, p.Window)
	checkFirstTokens(windows, records, step.Load.InFlight)
	loads, summary := loadWindows(records, windows)
	summary.InFlight, summary.InFlightByTier = step.Load.InFlight, step.Load.InFlightByTier
	summary.InFlightPerSession = summary.InFlight / float64(step.Sessions)
	reqs := requestsOf(records, windows)
	step.Judged = verdict.JudgeWith(p.Bar, windows, loads, reqs, p.Options)
	step.Judged.Warnings = append(step.Judged.Warnings, crossChecks(windows, summary)...)
	if step.Killed != "" {
		step.Judged = judgeKilled(step.Judged, step.KilledBy, step.Killed, "the kill switch ended this step early", "")
	}
	step.Load, step.Tokens, step.Windows = summary, tokensOf(windows), len(windows)
	step.KVCacheMean = gaugeMean(windows, signal.KVCacheUsage)
	q := queueOf(samples, from, to, p.KVFull)
	step.KVCachePeak, step.KVFullWaitingS, step.WaitingIdleS = q.kvPeak, q.fullWaiting.Seconds(), q.idleWaiting.Seconds()
	step.judgedWindows, step.judgedLoads, step.judgedRequests = windows, loads, reqs
	return step
}

// requestsOf is what the client saw of each turn planned in the judged
// windows, with its session, for the intervals to carry which sessions the
// run drew. A record without a session id (records written before it was
// kept) is its lane's play.
func requestsOf(records []load.Record, windows []signal.Window) []verdict.Request {
	out := make([]verdict.Request, 0, len(records))
	for _, rec := range records {
		k := windowOf(windows, rec.Send)
		if k < 0 {
			continue
		}
		r := verdict.Request{Window: k, Session: rec.Session, Tier: rec.Tier, Failed: rec.Failed()}
		if r.Session == "" {
			r.Session = fmt.Sprintf("lane %d play %d", rec.Lane, rec.Play)
		}
		r.Uncached = uncached(rec)
		if !rec.Failed() && !rec.Pending {
			r.TTFT = rec.TTFT()
			if rec.OutputTokens >= 2 && rec.LastToken > rec.FirstToken && rec.FirstToken > 0 {
				r.TPOT = (rec.LastToken - rec.FirstToken) / float64(rec.OutputTokens-1)
			}
		}
		out = append(out, r)
	}
	return out
}

// uncached is the prompt tokens the engine computed for a turn: what it
// served less what it reported cached where it reported any, and otherwise
// (an engine that keeps no usage details, or a prompt with nothing cached)
// the planned prompt less the share an ideal prefix cache would hold, which
// the trace's blocks give: a session resuming cold plans almost none cached.
func uncached(rec load.Record) int {
	if rec.CachedTokens > 0 && rec.ServedPromptTokens > 0 {
		return max(0, rec.ServedPromptTokens-rec.CachedTokens)
	}
	return max(0, rec.PlannedPromptTokens-rec.IdealCachedTokens)
}

// queue is how the engine's queue and KV cache went over a judged time, from
// every scrape in it (the windows keep only each gauge's mean, peak and last
// value, which cannot say whether the cache was full while requests waited).
type queue struct {
	kvPeak float64
	// the longest stretches, from a stretch's first scrape to its last, in
	// which the KV cache was at or above kv_full while requests waited, and
	// in which requests waited and none ran (a stretch of one scrape is 0)
	fullWaiting, idleWaiting time.Duration
}

// queueOf reads the samples taken in [from, to]. A scrape without the gauges
// a condition needs breaks its stretch: nothing is assumed.
func queueOf(samples []signal.Sample, from, to time.Duration, kvFull float64) queue {
	var q queue
	var fullSince, idleSince time.Duration = -1, -1
	stretch := func(since, longest *time.Duration, at time.Duration, on bool) {
		switch {
		case !on:
			*since = -1
		case *since < 0:
			*since = at
		}
		if on {
			*longest = max(*longest, at-*since)
		}
	}
	for _, s := range samples {
		if s.At < from || s.At > to {
			continue
		}
		kv, okKV := s.Gauge[signal.KVCacheUsage]
		waiting, okW := s.Gauge[signal.Waiting]
		running, okR := s.Gauge[signal.Running]
		if okKV {
			q.kvPeak = math.Max(q.kvPeak, kv)
		}
		stretch(&fullSince, &q.fullWaiting, s.At, kvFull > 0 && okKV && okW && kv >= kvFull && waiting > 0)
		stretch(&idleSince, &q.idleWaiting, s.At, okW && okR && waiting > 0 && running == 0)
	}
	return q
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
// The pooled step has every window of both runs, each counted once, however
// short a run was. A step either of whose runs the kill switch ended is
// judged on its pooled data (judgeKilled): the watched part fails when its
// pooled interval is beyond the bar and never passes, with a warning
// naming the kill.
func Pool(p Plan, first, again StepResult) StepResult {
	if first.judgedWindows == nil {
		if first.Killed != "" {
			again.Judged = judgeKilled(again.Judged, first.KilledBy, first.Killed, fmt.Sprintf("step %d's run was ended early by the kill switch", first.Index+1), "its windows are not kept, so this repeat's alone judge the step")
		}
		return again
	}
	ws := append(append([]signal.Window(nil), first.judgedWindows...), again.judgedWindows...)
	ls := append(append([]verdict.LoadWindow(nil), first.judgedLoads...), again.judgedLoads...)
	rs := append([]verdict.Request(nil), first.judgedRequests...)
	for _, r := range again.judgedRequests {
		r.Window += len(first.judgedWindows)
		rs = append(rs, r)
	}
	again.Judged = verdict.JudgeWith(p.Bar, ws, ls, rs, p.Options)
	again.Judged.Warnings = append(again.Judged.Warnings, fmt.Sprintf("judged on this run and step %d's together (%d windows: %d of step %d, %d of this run)",
		first.Index+1, len(ws), len(first.judgedWindows), first.Index+1, len(again.judgedWindows)))
	for _, run := range []struct {
		st  StepResult
		who string
	}{{first, fmt.Sprintf("step %d's run", first.Index+1)}, {again, "this run"}} {
		if run.st.Killed != "" {
			again.Judged = judgeKilled(again.Judged, run.st.KilledBy, run.st.Killed, run.who+" was ended early by the kill switch", "judged on both runs' windows pooled")
		}
	}
	again.Windows = len(ws)
	return again
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

// loadWindows counts, per judged window, the turns the lanes planned and what
// became of them, from the records of a step's judged time. A turn still in
// flight when the judged time ended (waiting or streaming) counts as sent in
// the window it went out in, and as unfinished.
func loadWindows(records []load.Record, windows []signal.Window) ([]verdict.LoadWindow, LoadSummary) {
	out := make([]verdict.LoadWindow, len(windows))
	var sum LoadSummary
	var end float64
	if len(windows) > 0 {
		end = windows[len(windows)-1].End.Seconds()
	}
	var ttfts []float64
	var planned, served, ideal, idealPlanned float64
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
			if unfinished(rec, end) {
				sum.Unfinished++
			}
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
		}
		// The server counts a prefix-cache lookup when it admits a request,
		// so the ideal covers every turn the engine took in, those still in
		// flight at the window's end included; refusals never reach the cache.
		if rec.ReachedServer() && rec.Status < 400 && (rec.Pending || !rec.Failed() || rec.Error == load.ErrAborted || rec.Error == load.ErrTimeout) {
			idealPlanned += float64(rec.PlannedPromptTokens)
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
	}
	if idealPlanned > 0 {
		sum.IdealHitRate = ideal / idealPlanned
	}
	return out, sum
}

// unfinished reports whether a sent turn had no outcome at end, as far as
// its record tells: live, it is still pending; saved, its last token came
// after end, or it was aborted (the run aborts requests only once its load
// stops, after every judged time). A failure that carries no time (a timeout
// or server error with no token) reads as finished.
func unfinished(rec load.Record, end float64) bool {
	return rec.Pending || rec.Error == load.ErrAborted || rec.LastToken > end
}

func windowOf(ws []signal.Window, t float64) int {
	for k, w := range ws {
		if t >= w.Start.Seconds() && t < w.End.Seconds() {
			return k
		}
	}
	return -1
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
		finished += w.Counter[signal.RequestsOK] + w.Counter[signal.RequestsAborted] + w.Counter[signal.RequestsFailed]
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

// tokensOf sums the step's token counters. Cached prompt tokens come from a
// counter kept with the prompt tokens (vLLM's prompt_tokens_cached, counted
// at the first token as prompt_tokens is); else from the prefix cache's
// hit share applied to the prompt tokens, since hits are counted when a
// request is admitted and prompt tokens when it first answers, and over a
// short window hits over prompt tokens can pass 100%.
func tokensOf(ws []signal.Window) Tokens {
	var t Tokens
	var cached, hits, queries float64
	withCached := false
	for _, w := range ws {
		t.Prompt += w.Counter[signal.PromptTokens]
		t.Output += w.Counter[signal.GenerationTokens]
		t.Seconds += (w.End - w.Start).Seconds()
		if v, ok := w.Counter[signal.PromptTokensCached]; ok {
			cached += v
			withCached = true
		}
		hits += w.Counter[signal.PrefixCacheHits]
		queries += w.Counter[signal.PrefixCacheQueries]
	}
	switch {
	case withCached:
		t.Cached = cached
	case queries > 0:
		t.Cached = t.Prompt * min(1, hits/queries)
	}
	if t.Seconds > 0 {
		t.PerHour = (t.Prompt + t.Output) / t.Seconds * 3600
	}
	return t
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
