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
