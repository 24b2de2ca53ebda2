package verdict

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
)

// errorCounters are the server-reported counters an error rate needs.
var errorCounters = []string{signal.HTTP4xx, signal.HTTP5xx, signal.RequestsAborted}

// endCounters count the requests that ended without an HTTP error status
// (aborted by the engine or the client, or failed: vLLM's finished_reason
// abort and error, a gateway's error_type such as Envoy's _OTHER): a
// mapping needs at least one; every one it has is counted. Modelplane's and
// OpenTelemetry's gen_ai names have no aborted counter, only failed, and
// their errors read no data while requests_aborted alone was asked for.
var endCounters = []string{signal.RequestsAborted, signal.RequestsFailed}

// errors judges the error rate: errors over planned turns, both counted in
// the same windows. The interval is a ratio estimator over turns (windows
// resampled, sum of errors over sum of planned turns of each resample), so a
// window weighs as many turns as it holds, and it is widened to at least the
// Wilson interval of k errors in n turns, as a latency interval is widened to
// its bucket: a handful of turns without errors is too close, never a pass on
// [0, 0]. A window's errors never count above its planned turns, so the rate
// and its interval stay within [0, 1].
func (j judge) errors(bar float64) Part {
	p := Part{Name: PartErrors, Bar: bar, Source: "http_4xx + http_5xx + requests_aborted + requests_failed + not reached + unsent", Verdict: NoData}
	p.Value.Confidence = j.o.Confidence
	n := min(len(j.windows), len(j.load))
	errs := make([]float64, n)
	planned := make([]float64, n)
	serverErrs, clientErrs := 0.0, 0
	absent := map[string]int{}
	for i := range n {
		for _, c := range errorCounters[:2] {
			v, ok := j.windows[i].Counter[c]
			if !ok {
				absent[c]++
				continue
			}
			errs[i] += v
			serverErrs += v
		}
		ends := 0
		for _, c := range endCounters {
			if v, ok := j.windows[i].Counter[c]; ok {
				errs[i] += v
				serverErrs += v
				ends++
			}
		}
		if ends == 0 {
			absent[signal.RequestsAborted]++
		}
		l := j.load[i]
		errs[i] += float64(l.NotReached + l.Unsent)
		planned[i] = float64(l.Planned)
		clientErrs += l.ClientErrors
	}
	if n == 0 {
		p.Missing = slices.Clone(errorCounters)
		p.Value.Warnings = append(p.Value.Warnings, "no windows to judge")
		return p
	}
	// the server reports no HTTP statuses at all: count what the client
	// saw (refusals, 5xx, timeouts, aborts, broken streams), openly, and
	// say so once rather than once per absent status counter as well
	fromClient := j.o.ClientErrors && absent[signal.HTTP4xx] == n && absent[signal.HTTP5xx] == n
	for _, c := range errorCounters {
		if absent[c] == 0 {
			continue
		}
		if !fromClient {
			p.Missing = append(p.Missing, c)
		} else if c == signal.HTTP4xx || c == signal.HTTP5xx {
			continue
		}
		what := c
		if c == signal.RequestsAborted {
			what = "requests_aborted (or requests_failed)"
		}
		p.Value.Warnings = append(p.Value.Warnings, fmt.Sprintf("%s is missing from %d of %d windows", what, absent[c], n))
	}
	if fromClient {
		for i := range n {
			l := j.load[i]
			errs[i] = float64(l.ClientErrors + l.Unsent)
		}
		p.Source = "client-seen errors + unsent (the server reports no HTTP statuses; bar.client_errors is on)"
		p.Value.Warnings = append(p.Value.Warnings, "the server reports no HTTP status counters: errors are the client's count")
	}
	if len(p.Missing) > 0 {
		return p // server error counters missing: errors cannot be judged
	}
	if w := clampErrors(errs, planned); w != "" {
		p.Value.Warnings = append(p.Value.Warnings, w)
	}
	sumE, sumP := 0.0, 0.0
	for i := range n {
		sumE += errs[i]
		sumP += planned[i]
	}
	if sumP == 0 {
		p.Value.Warnings = append(p.Value.Warnings, "no turns were planned in the step")
		return p
	}
	rate := sumE / sumP
	scores := make([]float64, n)
	for i := range n {
		scores[i] = errs[i] - rate*planned[i]
	}
	block := j.blockFor(scores)
	lo, hi, ok := stats.Bootstrap(n, func(idx []int) (float64, bool) {
		e, d := 0.0, 0.0
		for _, i := range idx {
			e += errs[i]
			d += planned[i]
		}
		return e / d, d > 0
	}, j.boot(block))
	if ok {
		var sp Spread
		lo, hi, sp, ok = j.spread(rate, lo, hi, n, block, j.widening(clientFailed, stats.WeightedMean, block), [2]float64{}, false)
		p.Spread = &sp
	}
	if !ok {
		lo, hi = rate, rate
		p.Spread = nil
		p.Value.Warnings = append(p.Value.Warnings, "too few windows with planned turns to bootstrap: the interval is the binomial one only")
	}
	k, turns := int(math.Round(sumE)), int(math.Round(sumP))
	wlo, whi := stats.Wilson(k, turns, j.o.Confidence)
	p.Value.Center = rate
	p.Value.Lo = math.Max(0, math.Min(math.Min(lo, wlo), rate))
	p.Value.Hi = math.Min(1, math.Max(math.Max(hi, whi), rate))
	p.Margin = bar - rate
	p.Verdict = errorVerdict(p.Value.Lo, p.Value.Hi, bar)
	switch boot := errorVerdict(math.Min(lo, rate), math.Max(hi, rate), bar); {
	case p.Verdict == TooClose && boot == Pass:
		p.Value.Warnings = append(p.Value.Warnings, fmt.Sprintf("few turns: %d errors in %d turns has a Wilson interval of %.2f-%.2f%%, not below the bar of %.2f%%: too close until more turns are judged (a longer step or a repeat)", k, turns, 100*wlo, 100*whi, 100*bar))
	case p.Verdict == TooClose && wlo >= bar:
		p.Value.Warnings = append(p.Value.Warnings, concentrated(errs, k, turns, wlo, whi, bar))
	}
	// with no status counters the client's count is the source: nothing of
	// the server's to check it against
	if d := math.Abs(float64(clientErrs) - serverErrs); !fromClient && d > math.Max(2, 0.1*math.Max(float64(clientErrs), serverErrs)) {
		p.Value.Warnings = append(p.Value.Warnings, fmt.Sprintf("cross-check: the client saw %d failed turns but the server reported %.0f errors (4xx+5xx+aborted)", clientErrs, serverErrs))
	}
	return p
}

// errorVerdict is the verdict of an error interval against the bar: pass
// when it lies below, fail when it lies at or above, too close otherwise.
func errorVerdict(lo, hi, bar float64) Verdict {
	switch {
	case hi < bar:
		return Pass
	case lo >= bar:
		return Fail
	}
	return TooClose
}

// clampErrors caps each window's errors at its planned turns and says which
// windows it capped. More errors than turns in a window is a counting bug
// upstream: the server counted requests the plan does not (a retry or a
// subagent that is not a planned turn), or an error landed in another window
// than its turn.
func clampErrors(errs, planned []float64) string {
	var over []string
	for i := range errs {
		if errs[i] > planned[i] {
			over = append(over, fmt.Sprintf("window %d: %.0f errors for %.0f planned turns", i, errs[i], planned[i]))
			errs[i] = planned[i]
		}
	}
	if len(over) == 0 {
		return ""
	}
	if len(over) > 3 {
		over = append(over[:3], fmt.Sprintf("and %d more", len(over)-3))
	}
	return fmt.Sprintf("counting bug upstream: more errors than planned turns (%s); each window's errors are capped at its planned turns, so the rate cannot pass 100%%. The server counts requests the plan does not (retries, subagents), or an error was counted in another window than its turn: report it", strings.Join(over, "; "))
}

// concentrated explains an error part that reads too close although the
// binomial interval of its counts lies above the bar: the errors sit in few
// windows, and resamples without them read low.
func concentrated(errs []float64, k, turns int, wlo, whi, bar float64) string {
	sum, sq, top := 0.0, 0.0, 0.0
	for _, e := range errs {
		sum += e
		sq += e * e
		top = max(top, e)
	}
	eff := 0.0
	if sq > 0 {
		eff = sum * sum / sq
	}
	return fmt.Sprintf("%d errors in %d turns is %.2f-%.2f%% binomially, above the %.2f%% bar, but the errors sit in %.1f effective windows of %d (the largest holds %.0f): resamples without those windows read low, so the step reads too close. Errors all stamped at one moment (a failed conversation's unsent turns) or a burst read this way", k, turns, 100*wlo, 100*whi, 100*bar, eff, len(errs), top)
}
