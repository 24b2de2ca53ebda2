package canary

import (
	"fmt"
	"math"
	"time"

	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/stats"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// judged is one side's judgement over a share step's windows so far.
type judged struct {
	windows []signal.Window
	loads   []verdict.LoadWindow
	step    verdict.Step
}

// judgeSide judges one side on the windows of [from, to) from its own
// engines' samples, with the client's view of its requests (what the
// router saw), exactly as a recipe run judges a step (verdict.JudgeWith).
// Without a client view (a gateway split the sessions: seen is false) a
// window's turns are the requests its server finished in it.
func judgeSide(bar verdict.Bar, o verdict.Options, width time.Duration, samples []signal.Sample, obs []Observation, seen bool, from, to time.Duration) judged {
	ws := signal.Windows(samples, from, to, width)
	loads := make([]verdict.LoadWindow, len(ws))
	if !seen {
		for k, w := range ws {
			n := int(math.Round(finished(w.Counter)))
			loads[k] = verdict.LoadWindow{Planned: n, Sent: n}
		}
		return judged{windows: ws, loads: loads, step: verdict.JudgeWith(bar, ws, loads, nil, o)}
	}
	reqs := make([]verdict.Request, 0, len(obs))
	for _, ob := range obs {
		k := windowOf(ws, ob.Arrival)
		if k < 0 {
			continue
		}
		l := &loads[k]
		l.Planned++
		failed := ob.NotReached || ob.Status >= 400
		if ob.NotReached {
			l.NotReached++
		} else {
			l.Sent++
		}
		if failed {
			l.ClientErrors++
		}
		r := verdict.Request{Window: k, Session: ob.Session, Failed: failed}
		if !failed && ob.First > ob.Arrival {
			r.TTFT = (ob.First - ob.Arrival).Seconds()
		}
		reqs = append(reqs, r)
	}
	return judged{windows: ws, loads: loads, step: verdict.JudgeWith(bar, ws, loads, reqs, o)}
}

// finished is the requests a server's counters say ended: those that
// finished normally and those that failed (the kill switch's count too).
func finished(counter map[string]float64) float64 {
	return counter[signal.RequestsOK] + counter[signal.HTTP4xx] + counter[signal.HTTP5xx] + counter[signal.RequestsAborted] + counter[signal.RequestsFailed]
}

// finishedOf is finished on a sample's cumulative counters.
func finishedOf(s signal.Sample) float64 { return finished(s.Counter) }

func windowOf(ws []signal.Window, t time.Duration) int {
	for k, w := range ws {
		if t >= w.Start && t < w.End {
			return k
		}
	}
	return -1
}

// NoWorse is how much worse than the baseline the candidate may be and
// still be "no worse than today".
type NoWorse struct {
	// Tolerance is the share by which the candidate's P90 TTFT may exceed
	// the baseline's, and its P90 interactivity fall short of it (0.1: 10%).
	Tolerance float64 `json:"tolerance"`
	// ErrorPoints is how far the candidate's error rate may exceed the
	// baseline's, as a fraction (0.01: one point).
	ErrorPoints float64 `json:"error_points"`
}

// Comparison is one part of the candidate-against-baseline verdict: the
// candidate's figure over the baseline's (latency; above 1 is worse) or
// minus it (errors; above 0 is worse), with its interval, from the
// windows both sides share, resampled together.
type Comparison struct {
	Name    string          `json:"name"`
	Verdict verdict.Verdict `json:"verdict"`
	Value   stats.Summary   `json:"value"`
	Limit   float64         `json:"limit"` // the value past which the candidate is worse than today
	Why     string          `json:"why,omitempty"`
}

// Compared is the "no worse than today" verdict: the worst of its parts.
type Compared struct {
	Verdict verdict.Verdict `json:"verdict"`
	Parts   []Comparison    `json:"parts"`
}

// compare judges the candidate against the baseline on the same windows.
// Windows are resampled in the same moving blocks on both sides at once
// (stats.Bootstrap over window indices), so what the two sides share (the
// hour's traffic) cancels out of the interval.
func compare(nw NoWorse, o verdict.Options, base, cand judged) Compared {
	n := min(len(base.windows), len(cand.windows))
	bo := stats.BootstrapOptions{Resamples: o.Resamples, Seed: o.Seed, Block: o.Block, Confidence: o.Confidence}
	parts := []Comparison{
		compareQuantile(verdict.PartTTFT, signal.TTFT, false, 1+nw.Tolerance, base.windows[:n], cand.windows[:n], bo),
		compareQuantile(verdict.PartInteractivity, signal.TPOT, true, 1+nw.Tolerance, base.windows[:n], cand.windows[:n], bo),
		compareErrors(nw.ErrorPoints, base, cand, n, bo),
	}
	c := Compared{Verdict: verdict.Pass, Parts: parts}
	for _, p := range parts {
		c.Verdict = verdict.Worse(c.Verdict, p.Verdict)
	}
	return c
}

// p90Of pools the named histogram over the chosen windows and reads its
// P90; ok is false when the windows hold no observation of it.
func p90Of(ws []signal.Window, idx []int, name string) (float64, bool) {
	var sum stats.Histogram
	for _, i := range idx {
		h, ok := ws[i].Hist[name]
		if !ok || h.Empty() {
			continue
		}
		var err error
		if sum, err = sum.Add(h); err != nil {
			return 0, false
		}
	}
	if sum.Empty() {
		return 0, false
	}
	v, _, _, ok := sum.Quantile(0.9)
	return v, ok && v > 0 && !math.IsInf(v, 0)
}

// compareQuantile is the ratio of the candidate's P90 of a histogram to the
// baseline's: for interactivity (per-request time per output token, whose
// inverse is the speed a user sees) the candidate's speed falls short of
// the baseline's by the same ratio.
func compareQuantile(part, name string, perToken bool, limit float64, base, cand []signal.Window, bo stats.BootstrapOptions) Comparison {
	c := Comparison{Name: part, Verdict: verdict.NoData, Limit: limit}
	c.Value.Confidence = bo.Confidence
	if perToken {
		c.Why = "candidate's P90 time per output token over the baseline's (its interactivity is short of the baseline's by this factor)"
	} else {
		c.Why = "candidate's P90 TTFT over the baseline's"
	}
	all := make([]int, len(base))
	for i := range all {
		all[i] = i
	}
	ratio := func(idx []int) (float64, bool) {
		b, okB := p90Of(base, idx, name)
		k, okC := p90Of(cand, idx, name)
		if !okB || !okC {
			return 0, false
		}
		return k / b, true
	}
	v, ok := ratio(all)
	if !ok {
		c.Why = name + ": no observations on one side or both: " + c.Why
		return c
	}
	lo, hi, ok := stats.Bootstrap(len(base), ratio, bo)
	c.Value.Center = v
	if !ok {
		c.Value.Lo, c.Value.Hi = v, v
		c.Verdict = verdict.TooClose
		c.Value.Warnings = append(c.Value.Warnings, "too few windows with observations on both sides to resample")
		return c
	}
	c.Value.Lo, c.Value.Hi = lo, hi
	c.Verdict = band(lo, hi, limit)
	return c
}

// compareErrors is the candidate's error rate minus the baseline's, each the
// server's errors over the turns the router sent the side in the same
// windows (the counters the bar's error part reads).
func compareErrors(points float64, base, cand judged, n int, bo stats.BootstrapOptions) Comparison {
	c := Comparison{Name: verdict.PartErrors, Verdict: verdict.NoData, Limit: points, Why: "candidate's error rate minus the baseline's"}
	c.Value.Confidence = bo.Confidence
	be, bp := windowErrors(base, n)
	ce, cp := windowErrors(cand, n)
	diff := func(idx []int) (float64, bool) {
		var sbe, sbp, sce, scp float64
		for _, i := range idx {
			sbe, sbp, sce, scp = sbe+be[i], sbp+bp[i], sce+ce[i], scp+cp[i]
		}
		if sbp == 0 || scp == 0 {
			return 0, false
		}
		return min(1, sce/scp) - min(1, sbe/sbp), true
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	v, ok := diff(all)
	if !ok {
		c.Why = "no turns on one side or both: " + c.Why
		return c
	}
	c.Value.Center = v
	lo, hi, ok := stats.Bootstrap(n, diff, bo)
	if !ok {
		c.Value.Lo, c.Value.Hi = v, v
		c.Verdict = verdict.TooClose
		return c
	}
	c.Value.Lo, c.Value.Hi = lo, hi
	c.Verdict = band(lo, hi, points)
	return c
}

// windowErrors is each window's errors (the server's 4xx, 5xx, aborted and
// failed requests, and the turns that never reached it) and turns.
func windowErrors(j judged, n int) (errs, turns []float64) {
	errs, turns = make([]float64, n), make([]float64, n)
	for i := range n {
		w := j.windows[i]
		for _, name := range []string{signal.HTTP4xx, signal.HTTP5xx, signal.RequestsAborted, signal.RequestsFailed} {
			errs[i] += w.Counter[name]
		}
		if i < len(j.loads) {
			errs[i] += float64(j.loads[i].NotReached)
			turns[i] = float64(j.loads[i].Planned)
		}
	}
	return errs, turns
}

// band is the verdict of an interval against a limit that larger values
// must not pass: within it, beyond it, or across it.
func band(lo, hi, limit float64) verdict.Verdict {
	switch {
	case hi <= limit:
		return verdict.Pass
	case lo > limit:
		return verdict.Fail
	}
	return verdict.TooClose
}

// Kill is the kill switch's limits (sweep.kill in the run file); 0 turns
// one off.
type Kill struct {
	QueuePerSession float64 `json:"queue_per_session"`
	ErrorRate       float64 `json:"error_rate"`
	TTFTFactor      float64 `json:"ttft_factor"`
}

// clearMiss applies the kill switch's rule to the candidate's latest whole
// window (as a recipe run's kill switch reads a step's: see
// sweep.(*Runner).kill, whose limits these are): a queue growing over
// three scrapes past queue_per_session per live session, a P90 TTFT past
// ttft_factor times the bar, or more than error_rate of at least 10
// finished requests failed. It returns why it tripped, "" when it did not.
func clearMiss(k Kill, bar verdict.Bar, samples []signal.Sample, last signal.Window, sessions int) string {
	if k.QueuePerSession > 0 && len(samples) >= 3 && sessions > 0 {
		a, b, c := samples[len(samples)-3], samples[len(samples)-2], samples[len(samples)-1]
		w := c.Gauge[signal.Waiting]
		if limit := k.QueuePerSession * float64(sessions); w > limit && w > b.Gauge[signal.Waiting] && b.Gauge[signal.Waiting] > a.Gauge[signal.Waiting] {
			return fmt.Sprintf("%.0f requests waiting and growing (limit %.0f for %d sessions)", w, limit, sessions)
		}
	}
	if k.TTFTFactor > 0 {
		if h, ok := last.Hist[signal.TTFT]; ok {
			if v, _, _, ok := h.Quantile(0.9); ok && v > k.TTFTFactor*bar.TTFTP90 {
				return fmt.Sprintf("P90 TTFT of the last window %.1fs is past %g times the bar", v, k.TTFTFactor)
			}
		}
	}
	if k.ErrorRate > 0 {
		errs := last.Counter[signal.HTTP4xx] + last.Counter[signal.HTTP5xx] + last.Counter[signal.RequestsAborted] + last.Counter[signal.RequestsFailed]
		done := errs + last.Counter[signal.RequestsOK]
		if done >= 10 && errs/done > k.ErrorRate {
			return fmt.Sprintf("%.0f%% of the last window's requests failed (limit %.0f%%)", 100*errs/done, 100*k.ErrorRate)
		}
	}
	return ""
}
